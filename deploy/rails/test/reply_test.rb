# frozen_string_literal: true

require_relative "test_helper"

# Reply jobs as the worker pushes them: ActiveJob's Sidekiq adapter format and the plain Sidekiq one.
class ReplyTest < Minitest::Test
  include InferenceTasksTest

  WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"

  def test_an_active_job_reply_is_the_adapters_job_wrapping_the_outcome
    queue = "minitest-replies-#{SecureRandom.hex(4)}"
    id = client.enqueue_embed(["reply as an ActiveJob"],
                              reply_to: { active_job: { class: "EmbeddingReadyJob", queue: queue,
                                                        context: { "article_id" => 7 } } })
    job = reply_job(queue)
    assert_equal [WRAPPER, "EmbeddingReadyJob", queue], job.values_at("class", "wrapped", "queue")
    data = job["args"].fetch(0)
    assert_equal ["EmbeddingReadyJob", queue, 0, {}], data.values_at("job_class", "queue_name", "executions",
                                                                      "exception_executions")
    outcome = data["arguments"].fetch(0)
    assert_equal [id, "inference.embed", "SUCCESS", { "article_id" => 7 }],
                 outcome.values_at("task_id", "task", "state", "context")
    assert_equal 384, outcome["result"]["embeddings"][0].size
    assert_equal [], outcome["_aj_symbol_keys"]
    # The result went out once, in the reply: Redis keeps only a stub naming it.
    stored = final_result(id)["result"]
    assert_equal({ "class" => "EmbeddingReadyJob", "queue" => queue, "format" => "active_job" },
                 stored["delivered_in_reply"])
  ensure
    redis.del("celery-task-meta-#{id}") if id
  end

  def test_a_failed_task_replies_too_with_the_reason
    queue = "minitest-replies-#{SecureRandom.hex(4)}"
    id = client.enqueue_embed(["   "], reply_to: { active_job: { class: "EmbeddingReadyJob", queue: queue } })
    outcome = reply_job(queue)["args"][0]["arguments"][0]
    assert_equal "FAILURE", outcome["state"]
    assert_includes outcome["error"]["message"], "texts[0] is empty or blank"
    assert_nil outcome["result"]
  ensure
    redis.del("celery-task-meta-#{id}") if id
  end

  def test_a_message_the_workers_refuse_unread_still_replies_with_the_reason
    queue = "minitest-replies-#{SecureRandom.hex(4)}"
    id = SecureRandom.uuid
    message = InferenceTasks::Wire.message("inference.embed", [["x"]], {}, id, "inference", 0,
                                           { active_job: { class: "EmbeddingReadyJob", queue: queue } })
    message["body"] = "not base64 JSON!"
    redis.lpush("inference", JSON.generate(message))
    outcome = reply_job(queue)["args"][0]["arguments"][0]
    assert_equal [id, "FAILURE", "MalformedMessage"], [outcome["task_id"], outcome["state"], outcome["error"]["type"]]
    assert_includes outcome["error"]["message"], "body"
  ensure
    redis.del("celery-task-meta-#{id}")
  end

  def test_a_plain_sidekiq_reply_carries_the_outcome_as_its_only_argument
    queue = "minitest-replies-#{SecureRandom.hex(4)}"
    id = client.enqueue_classify(["I was charged twice"], %w[billing shipping],
                                 reply_to: { sidekiq: { class: "ClassificationReadyWorker", queue: queue } })
    job = reply_job(queue)
    assert_equal ["ClassificationReadyWorker", queue, true], job.values_at("class", "queue", "retry")
    refute job.key?("wrapped")
    outcome = job["args"].fetch(0)
    assert_equal [id, "SUCCESS", "billing"], [outcome["task_id"], outcome["state"], outcome["result"][0]["label"]]
  ensure
    redis.del("celery-task-meta-#{id}") if id
  end

  def test_an_active_job_class_given_as_a_class_replies_on_its_own_queue
    job_class = Class.new do
      def self.queue_name = "mailers"
      def self.to_s = "NotifyJob"
    end
    request = InferenceTasks::Wire.reply_request({ active_job: { class: job_class } })
    assert_equal({ "class" => "NotifyJob", "queue" => "mailers", "format" => "active_job" },
                 request.slice("class", "queue", "format"))
  end

  def test_an_unknown_reply_kind_is_refused_before_anything_is_pushed
    queue = idle_queue
    error = assert_raises(ArgumentError) do
      client.enqueue_embed(["x"], queue: queue, reply_to: { resque: { class: "X" } })
    end
    assert_includes error.message, "reply_to must be"
    assert_equal 0, client.queue_depth(queue)
  end
end

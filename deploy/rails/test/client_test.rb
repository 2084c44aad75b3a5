# frozen_string_literal: true

require_relative "test_helper"

# The client's blocking calls, polling, errors and backpressure against the real worker.
class ClientTest < Minitest::Test
  include InferenceTasksTest

  def test_embed_returns_one_unit_vector_per_text_in_order
    result = client.embed(["The cat sleeps on the sofa.", "Quarterly revenue grew.", "Reset my password"],
                          timeout: TIMEOUT)
    assert_equal "all-MiniLM-L6-v2", result["model"]
    assert_equal 384, result["dim"]
    assert_equal 3, result["embeddings"].size
    assert_in_delta 1.0, Math.sqrt(result["embeddings"][0].sum { |x| x * x }), 1e-4
  end

  def test_compact_vectors_decode_to_exactly_the_json_ones
    texts = ["Red running shoes", "Blue rain jacket"]
    assert_equal client.embed(texts, timeout: TIMEOUT)["embeddings"],
                 client.embed(texts, encoding: "f32-base64", timeout: TIMEOUT)["embeddings"]
  end

  def test_a_model_routes_to_its_queue_and_is_named_in_the_task
    client.enqueue_embed(["a text"], model: "gemtest") # a model no worker serves: the message stays put
    message = JSON.parse(redis.rpop("inference.gemtest"))
    args, kwargs, = JSON.parse(Base64.decode64(message["body"]))
    assert_equal [["a text"]], args
    assert_equal "gemtest", kwargs["model"]
    assert_equal "inference.gemtest", message["properties"]["delivery_info"]["routing_key"]
    client.enqueue_train_classifier("head", ["a", "b"], %w[x y], model: "gemtest") # its trainer's queue
    training = JSON.parse(redis.rpop("training.gemtest"))
    assert_equal "gemtest", JSON.parse(Base64.decode64(training["body"]))[1]["model"]
    error = assert_raises(ArgumentError) { client.enqueue_embed(["a text"], model: "E5!") }
    assert_match(/model must be a catalogue alias/, error.message)
  end

  # Every task argument a method offers reaches the task under the task's own name (docs/tasks.md, "Arguments").
  def test_the_enqueue_methods_send_each_argument_under_the_tasks_name
    sent = lambda do |queue|
      JSON.parse(Base64.decode64(JSON.parse(redis.rpop(queue))["body"]))[1]
    end
    client.enqueue_embed_chunks(["a text"], normalize: false, model: "gemtest")
    assert_equal false, sent.call("inference.gemtest")["normalize"]
    client.enqueue_classify(["a text"], %w[x y], truncate: false, model: "gemtest")
    assert_equal false, sent.call("inference.gemtest")["truncate"]
    client.enqueue_classify_with("head", ["a text"], version: 3, truncate: false, model: "gemtest")
    assert_equal({ "classifier" => "head", "classifier_version" => 3, "truncate" => false, "model" => "gemtest" },
                 sent.call("inference.gemtest"))
    client.enqueue_embed_corpus("corpus-key", normalize: false, encoding: "json", model: "gemtest")
    assert_equal({ "source_key" => "corpus-key", "page_size" => 256, "normalize" => false, "encoding" => "json",
                   "model" => "gemtest" }, sent.call("training.gemtest"))
  end

  # With the opentelemetry-api gem loaded, the current span's context goes in the message headers; a
  # traceparent: given wins; a malformed one is refused before anything is sent. The gem cannot be
  # installed here (no rubygems.org): a stand-in answers OpenTelemetry.propagation.inject as the API does.
  def test_the_current_trace_context_travels_in_the_headers_unless_one_is_given
    queue = idle_queue
    client.enqueue_embed(["a"], queue: queue)
    refute JSON.parse(redis.rpop(queue))["headers"].key?("traceparent")
    current = "00-#{SecureRandom.hex(16)}-#{SecureRandom.hex(8)}-01"
    propagator = Object.new
    propagator.define_singleton_method(:inject) do |carrier|
      carrier.merge!("traceparent" => current, "tracestate" => "v=1")
    end
    Object.const_set(:OpenTelemetry, Module.new)
    OpenTelemetry.define_singleton_method(:propagation) { propagator }
    client.enqueue_embed(["a"], queue: queue)
    assert_equal [current, "v=1"], JSON.parse(redis.rpop(queue))["headers"].values_at("traceparent", "tracestate")
    given = "00-#{'a' * 32}-#{'b' * 16}-01"
    client.enqueue_embed(["a"], queue: queue, traceparent: given)
    assert_equal given, JSON.parse(redis.rpop(queue))["headers"]["traceparent"]
    assert_raises(ArgumentError) { client.enqueue_embed(["a"], queue: queue, traceparent: "00-xyz") }
    assert_equal 0, redis.llen(queue)
  ensure
    Object.send(:remove_const, :OpenTelemetry) if Object.const_defined?(:OpenTelemetry)
  end

  def test_the_default_model_answers_by_its_alias
    assert_equal "minilm", client.embed(["a text"], model: "minilm", timeout: TIMEOUT)["alias"]
  end

  def test_classify_picks_the_closest_label_for_each_text
    predictions = client.classify(["The striker scored twice in the football match.",
                                   "Simmer the sauce with garlic and basil."], %w[sports cooking finance],
                                  timeout: TIMEOUT)
    assert_equal %w[sports cooking], predictions.map { |prediction| prediction["label"] }
  end

  def test_a_finished_result_is_deleted_by_the_read_that_returns_it_unless_kept
    kept = client.enqueue_embed(["keep me"], priority: 3)
    assert_equal 384, client.wait(kept, timeout: TIMEOUT, keep: true)["dim"]
    assert redis.exists?("celery-task-meta-#{kept}")
    assert_equal "SUCCESS", client.state(kept)
    client.wait(kept, timeout: TIMEOUT)
    refute redis.exists?("celery-task-meta-#{kept}")
  end

  def test_invalid_input_raises_task_failed_with_the_workers_message_and_leaves_nothing
    error = assert_raises(InferenceTasks::TaskFailed) { client.embed([42], timeout: TIMEOUT) }
    assert_equal "InvalidInput", error.remote_type
    assert_includes error.message, "texts[0] must be a string, got a number (42)"
    refute redis.exists?("celery-task-meta-#{error.task_id}")
  end

  def test_waiting_on_a_task_that_never_finishes_times_out
    error = assert_raises(InferenceTasks::Timeout) { client.wait(SecureRandom.uuid, timeout: 0.3) }
    assert_includes error.message, "did not finish within 0.3 s"
  end

  def test_a_full_queue_refuses_with_queue_full_and_pushes_nothing
    queue = idle_queue
    bounded = client(max_queue_depth: 2)
    2.times { bounded.enqueue_embed(["waits"], queue: queue, priority: 4) }
    error = assert_raises(InferenceTasks::QueueFull) { bounded.enqueue_embed(["one too many"], queue: queue) }
    assert_equal [queue, 2, 2], [error.queue, error.depth, error.limit]
    assert_equal 2, bounded.queue_depth(queue)
    assert_equal 2, redis.llen("#{queue}:4")
  ensure
    redis.del(queue, "#{queue}:4")
  end

  def test_a_head_trained_from_ruby_classifies
    path = File.expand_path("../../../data/support_tickets.jsonl", __dir__)
    rows = File.readlines(path).map { |line| JSON.parse(line) }
    trained = client.wait(client.enqueue_train_classifier("minitest-trained", rows.map { |r| r["text"] },
                                                          rows.map { |r| r["label"] }), timeout: 300)
    assert_operator trained["metrics"]["held_out_accuracy"], :>=, 0.9
    labels = client.wait(client.enqueue_classify_with("minitest-trained",
                                                      ["My parcel never arrived and tracking is broken."],
                                                      version: trained["version"]), timeout: TIMEOUT)
    assert_equal ["shipping"], labels.map { |prediction| prediction["label"] }
  end
end

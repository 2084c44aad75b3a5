# frozen_string_literal: true

# InferenceTasks: enqueue embedding and classification tasks for inference_tasks' Celery workers
# straight into Redis, and read their results, from Ruby. Depends only on the `redis` gem.
#
# The message format is Celery's protocol v2 as documented in docs/wire-protocol.md; the task
# names and argument shapes are the public contract in README.md.

require "base64"
require "json"
require "redis"
require "securerandom"
require "socket"

module InferenceTasks
  DEFAULT_QUEUE = "inference"
  TRAINING_QUEUE = "training"
  PRIORITIES = (0..9).freeze
  RESULT_KEY_PREFIX = "celery-task-meta-"
  READY_STATES = %w[SUCCESS FAILURE REVOKED].freeze
  # Training runs take minutes: #wait on them with a longer timeout.

  # Base class of everything this client raises.
  class Error < StandardError; end

  # The task ran (or was refused) and failed; #remote_type and #message come from the worker.
  class TaskFailed < Error
    attr_reader :task_id, :remote_type, :state

    def initialize(task_id, remote_type, message, state = "FAILURE")
      @task_id = task_id
      @remote_type = remote_type
      @state = state
      super("#{remote_type}: #{message}")
    end
  end

  # No result arrived within the timeout; the task may still run later.
  class Timeout < Error; end

  # A finished task's outcome: #value is the task's JSON result.
  Result = Struct.new(:task_id, :state, :value, keyword_init: true)

  class Client
    # redis: a Redis client on the workers' broker (the same REDIS_URL as the workers).
    def initialize(redis: Redis.new(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")))
      @redis = redis
    end

    # Enqueue inference.embed; returns the task id. Options: queue:, priority: (0-9, 0 is served
    # first), task_id:, reply_to: { sidekiq: { class: "JobClass", queue: "default", context: {...} } }.
    def enqueue_embed(texts, normalize: true, **options)
      enqueue("inference.embed", [texts], { "normalize" => normalize }, **options)
    end

    # Enqueue inference.classify (zero-shot over labels); returns the task id.
    def enqueue_classify(texts, labels, **options)
      enqueue("inference.classify", [texts, labels], {}, **options)
    end

    # Enqueue inference.train_classifier on the training queue; returns the task id. Poll #state for
    # "PROGRESS" (#progress gives stage/done/total); the result holds the new head's version and metrics.
    def enqueue_train_classifier(name, texts, labels, test_fraction: 0.2, seed: 0, queue: TRAINING_QUEUE, **options)
      kwargs = { "name" => name, "texts" => texts, "labels" => labels, "test_fraction" => test_fraction, "seed" => seed }
      enqueue("inference.train_classifier", [], kwargs, queue: queue, **options)
    end

    # Enqueue inference.classify with a trained head instead of zero-shot labels.
    def enqueue_classify_with(classifier, texts, version: nil, **options)
      kwargs = { "classifier" => classifier }
      kwargs["classifier_version"] = version if version
      enqueue("inference.classify", [texts], kwargs, **options)
    end

    # Enqueue inference.embed_corpus for a large corpus held in a Redis list (RPUSH the texts first).
    def enqueue_embed_corpus(source_key, page_size: 256, queue: TRAINING_QUEUE, **options)
      enqueue("inference.embed_corpus", [], { "source_key" => source_key, "page_size" => page_size },
              queue: queue, **options)
    end

    # {"stage" => ..., "done" => n, "total" => n} while a training task reports PROGRESS, else nil.
    def progress(task_id)
      raw = @redis.get(RESULT_KEY_PREFIX + task_id)
      meta = raw && JSON.parse(raw)
      meta && meta["status"] == "PROGRESS" ? meta["result"] : nil
    end

    # Embed and wait: returns {"model" => ..., "dim" => ..., "embeddings" => [[Float]]}.
    def embed(texts, normalize: true, timeout: 30, **options)
      wait(enqueue_embed(texts, normalize: normalize, **options), timeout: timeout)
    end

    # Classify and wait: returns one {"label", "score", "scores"} hash per text, in order.
    def classify(texts, labels, timeout: 30, **options)
      wait(enqueue_classify(texts, labels, **options), timeout: timeout)
    end

    # Enqueue any task by wire name with positional args and keyword args; returns the task id.
    def enqueue(task, args, kwargs = {}, queue: DEFAULT_QUEUE, priority: 0, task_id: nil, reply_to: nil)
      raise ArgumentError, "priority must be 0..9, got #{priority.inspect}" unless PRIORITIES.include?(priority)

      task_id ||= SecureRandom.uuid
      message = build_message(task, args, kwargs, task_id, queue, priority, reply_to)
      @redis.lpush(priority.zero? ? queue : "#{queue}:#{priority}", JSON.generate(message))
      task_id
    end

    # The result if the task has finished, else nil. Raises TaskFailed for FAILURE.
    def result(task_id)
      raw = @redis.get(RESULT_KEY_PREFIX + task_id)
      return nil if raw.nil?

      meta = JSON.parse(raw)
      state = meta.fetch("status")
      return nil unless READY_STATES.include?(state)
      raise failure(task_id, state, meta["result"]) unless state == "SUCCESS"

      Result.new(task_id: task_id, state: state, value: meta["result"])
    end

    # The current state: "PENDING" (unknown or not started), "STARTED", "SUCCESS", "FAILURE", ...
    def state(task_id)
      raw = @redis.get(RESULT_KEY_PREFIX + task_id)
      raw.nil? ? "PENDING" : JSON.parse(raw).fetch("status")
    end

    # Poll until the task finishes; returns its JSON result, raises TaskFailed or Timeout.
    def wait(task_id, timeout: 30, interval: 0.05)
      deadline = monotonic + timeout
      loop do
        outcome = result(task_id)
        return outcome.value if outcome
        raise Timeout, "task #{task_id} did not finish within #{timeout} s" if monotonic > deadline

        sleep(interval)
        interval = [interval * 1.5, 0.5].min
      end
    end

    private

    def build_message(task, args, kwargs, task_id, queue, priority, reply_to)
      headers = {
        "lang" => "rb", "task" => task, "id" => task_id, "root_id" => task_id, "parent_id" => nil,
        "group" => nil, "retries" => 0, "eta" => nil, "expires" => nil,
        "origin" => "ruby@#{Socket.gethostname}"
      }
      headers["sidekiq_reply"] = sidekiq_reply(reply_to) if reply_to
      body = [args, kwargs, { "callbacks" => nil, "errbacks" => nil, "chain" => nil, "chord" => nil }]
      {
        "body" => Base64.strict_encode64(JSON.generate(body)),
        "content-encoding" => "utf-8",
        "content-type" => "application/json",
        "headers" => headers,
        "properties" => {
          "correlation_id" => task_id, "reply_to" => "", "delivery_mode" => 2,
          "delivery_info" => { "exchange" => "", "routing_key" => queue },
          "priority" => priority, "body_encoding" => "base64", "delivery_tag" => SecureRandom.uuid
        }
      }
    end

    def sidekiq_reply(reply_to)
      spec = reply_to.fetch(:sidekiq) { raise ArgumentError, "reply_to supports only sidekiq: {class:, queue:}" }
      job_class = spec.fetch(:class) { raise ArgumentError, "reply_to sidekiq needs class:" }
      reply = { "class" => job_class.to_s, "queue" => (spec[:queue] || "default").to_s }
      reply["context"] = spec[:context] if spec.key?(:context)
      reply
    end

    def failure(task_id, state, payload)
      if payload.is_a?(Hash)
        message = Array(payload["exc_message"]).join(" ")
        TaskFailed.new(task_id, payload["exc_type"] || state, message, state)
      else
        TaskFailed.new(task_id, state, payload.to_s, state)
      end
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

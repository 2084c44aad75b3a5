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
  ENCODINGS = %w[json f32-base64].freeze

  # Read a result and, only if the task has finished, delete it: one round trip, and atomic, so a
  # STARTED or PROGRESS state another poller may still want is never removed. Celery writes
  # "status" as the first key of the result's JSON.
  READ_FINISHED_RESULT = <<~LUA
    local raw = redis.call('GET', KEYS[1])
    if not raw then return false end
    local state = string.match(raw, '"status"%s*:%s*"(%u+)"')
    if state == 'SUCCESS' or state == 'FAILURE' or state == 'REVOKED' then redis.call('DEL', KEYS[1]) end
    return raw
  LUA

  # Push a message unless the queue's priority lists (KEYS[2..]) already hold ARGV[2] messages:
  # check and push in one step, so racing producers never overshoot the limit. Returns the depth
  # seen, negated (-depth - 1) when nothing was pushed.
  PUSH_UNLESS_FULL = <<~LUA
    local depth = 0
    for i = 2, #KEYS do depth = depth + redis.call('LLEN', KEYS[i]) end
    if depth >= tonumber(ARGV[2]) then return -depth - 1 end
    redis.call('LPUSH', KEYS[1], ARGV[1])
    return depth
  LUA

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

  # The queue already holds max_queue_depth waiting messages (all priorities); nothing was pushed.
  class QueueFull < Error
    attr_reader :queue, :depth, :limit

    def initialize(queue, depth, limit)
      @queue = queue
      @depth = depth
      @limit = limit
      super("queue #{queue.inspect} holds #{depth} waiting messages, at or over max_queue_depth=#{limit}; " \
            "nothing was pushed: retry later, or add workers")
    end
  end

  # Redis refused the write: it is at maxmemory with noeviction. Nothing was pushed.
  class RedisFull < Error; end

  # Little-endian float32 vectors, base64 (inference.embed with encoding: "f32-base64"): one Array per text.
  def self.decode_vectors(base64, dim)
    base64.unpack1("m").unpack("e*").each_slice(dim).to_a
  end

  # A finished task's outcome: #value is the task's JSON result.
  Result = Struct.new(:task_id, :state, :value, keyword_init: true)

  class Client
    # redis: a Redis client on the workers' broker (the same REDIS_URL as the workers).
    # max_queue_depth: refuse (QueueFull) to enqueue onto a queue already holding this many waiting
    # messages, all priorities together; nil never checks.
    def initialize(redis: Redis.new(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")), max_queue_depth: nil)
      if max_queue_depth && !(max_queue_depth.is_a?(Integer) && max_queue_depth.positive?)
        raise ArgumentError, "max_queue_depth must be a positive Integer or nil"
      end

      @redis = redis
      @max_queue_depth = max_queue_depth
    end

    # Enqueue inference.embed; returns the task id. Options: queue:, priority: (0-9, 0 is served
    # first), task_id:, reply_to: { sidekiq: { class: "JobClass", queue: "default", context: {...} } }.
    # encoding: "f32-base64" asks for the compact result (a quarter of the JSON's size).
    def enqueue_embed(texts, normalize: true, encoding: nil, **options)
      kwargs = { "normalize" => normalize }
      kwargs["encoding"] = encoding if encoding
      enqueue("inference.embed", [texts], kwargs, **options)
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

    # Embed and wait: returns {"model" => ..., "dim" => ..., "embeddings" => [[Float]]}. With
    # encoding: "f32-base64" the vectors travel as float32 bytes and are decoded here into the same
    # shape (plus "count" and "encoding"). The result is deleted from Redis once read (keep: true keeps it).
    def embed(texts, normalize: true, encoding: "json", timeout: 30, keep: false, **options)
      raise ArgumentError, "encoding must be one of #{ENCODINGS.inspect}" unless ENCODINGS.include?(encoding)

      wire = encoding == "json" ? nil : encoding
      value = wait(enqueue_embed(texts, normalize: normalize, encoding: wire, **options), timeout: timeout, keep: keep)
      return value unless value["encoding"] == "f32-base64"

      value.merge("embeddings" => InferenceTasks.decode_vectors(value["embeddings"], value["dim"]))
    end

    # Classify and wait: returns one {"label", "score", "scores"} hash per text, in order.
    def classify(texts, labels, timeout: 30, keep: false, **options)
      wait(enqueue_classify(texts, labels, **options), timeout: timeout, keep: keep)
    end

    # Enqueue any task by wire name with positional args and keyword args; returns the task id.
    def enqueue(task, args, kwargs = {}, queue: DEFAULT_QUEUE, priority: 0, task_id: nil, reply_to: nil)
      raise ArgumentError, "priority must be 0..9, got #{priority.inspect}" unless PRIORITIES.include?(priority)

      task_id ||= SecureRandom.uuid
      message = JSON.generate(build_message(task, args, kwargs, task_id, queue, priority, reply_to))
      push(queue, priority, message)
      task_id
    end

    # Waiting messages in a queue, all priority lists together.
    def queue_depth(queue = DEFAULT_QUEUE)
      @redis.pipelined { |pipe| queue_keys(queue).each { |key| pipe.llen(key) } }.sum
    end

    # The result if the task has finished, else nil. Raises TaskFailed for FAILURE. A finished
    # result is deleted from Redis by the read that returns it, unless keep: true.
    def result(task_id, keep: false)
      key = RESULT_KEY_PREFIX + task_id
      raw = keep ? @redis.get(key) : @redis.eval(READ_FINISHED_RESULT, keys: [key])
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

    # Poll until the task finishes; returns its JSON result, raises TaskFailed or Timeout. The
    # result is deleted from Redis by the read that returns it, unless keep: true.
    def wait(task_id, timeout: 30, interval: 0.05, keep: false)
      deadline = monotonic + timeout
      loop do
        outcome = result(task_id, keep: keep)
        return outcome.value if outcome
        raise Timeout, "task #{task_id} did not finish within #{timeout} s" if monotonic > deadline

        sleep(interval)
        interval = [interval * 1.5, 0.5].min
      end
    end

    private

    def queue_keys(queue)
      PRIORITIES.map { |step| step.zero? ? queue : "#{queue}:#{step}" }
    end

    def push(queue, priority, message)
      target = priority.zero? ? queue : "#{queue}:#{priority}"
      unless @max_queue_depth
        @redis.lpush(target, message)
        return
      end
      depth = @redis.eval(PUSH_UNLESS_FULL, keys: [target, *queue_keys(queue)], argv: [message, @max_queue_depth])
      raise QueueFull.new(queue, -depth - 1, @max_queue_depth) if depth.negative?
    rescue Redis::CommandError => e
      raise unless e.message.include?("OOM")

      raise RedisFull, "Redis is full (maxmemory reached, it refuses writes): nothing was pushed (#{e.message}). " \
                       "Results nobody reads and deletes are the usual cause: see docs/operations.md"
    end

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

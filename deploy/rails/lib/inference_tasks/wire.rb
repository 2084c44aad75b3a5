# frozen_string_literal: true

require "base64"
require "json"
require "securerandom"
require "socket"

module InferenceTasks
  # The Redis side of the contract (docs/wire-protocol.md): key names, the Lua scripts, the Celery
  # protocol v2 message and the reply request the worker honours.
  module Wire
    DEFAULT_QUEUE = "inference"
    TRAINING_QUEUE = "training"
    PRIORITIES = (0..9).freeze
    RESULT_KEY_PREFIX = "celery-task-meta-"
    READY_STATES = %w[SUCCESS FAILURE REVOKED].freeze
    ENCODINGS = %w[json f32-base64 int8 uint8 binary ubinary].freeze
    # How each packed encoding's bytes unpack, and how many values a vector has (its dimensions, or
    # its sign bits packed 8 per byte).
    PACKED = {
      "f32-base64" => ["e*", :dims], "int8" => ["c*", :dims], "uint8" => ["C*", :dims],
      "binary" => ["c*", :bits], "ubinary" => ["C*", :bits]
    }.freeze
    # The header stamped with the send time (Unix seconds), from which results report usage["queue_ms"].
    SENT_AT_HEADER = "inference_sent_at"
    # Set on a durable push (Client durable: true): a worker runs the first message it takes with the
    # task id and drops any other, so a retry with the same task id after NotReplicated is safe.
    DURABLE_HEADER = "inference_durable"
    # W3C Trace Context (docs/operations.md, "Traces"): version-traceid-parentid-flags, lower-case hex.
    TRACEPARENT = /\A[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\z/
    # How the reply job is written: a plain Sidekiq job, or ActiveJob's Sidekiq adapter format.
    REPLY_FORMATS = { sidekiq: "sidekiq", active_job: "active_job" }.freeze

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

    module_function

    # The queue of catalogue model `model`: a model is a queue (docs/wire-protocol.md); no catalogue
    # is needed to route. base: "inference", or "training" for the trainer's tasks.
    def model_queue(model, base = DEFAULT_QUEUE)
      unless model.is_a?(String) && model.match?(/\A[a-z0-9][a-z0-9_-]{0,39}\z/)
        raise ArgumentError, "model must be a catalogue alias (1-40 of a-z 0-9 _ -), got #{model.inspect}"
      end

      "#{base}.#{model}"
    end

    def check_durable_replicas(replicas)
      return replicas if replicas.is_a?(Integer) && replicas >= 1

      raise ArgumentError, "durable_replicas must be an Integer of 1 or more, got #{replicas.inspect}"
    end

    def check_durable_timeout(timeout)
      return timeout if timeout.is_a?(Numeric) && timeout.positive? && timeout <= 60

      raise ArgumentError, "durable_timeout must be seconds above 0 and at most 60, got #{timeout.inspect}"
    end

    # The Redis lists holding a queue's waiting messages, priority 0 (served first) to 9.
    def queue_keys(queue)
      PRIORITIES.map { |step| priority_key(queue, step) }
    end

    def priority_key(queue, priority)
      priority.zero? ? queue : "#{queue}:#{priority}"
    end

    # A Celery protocol v2 message, as JSON-ready Hash. trace: {"traceparent" =>, "tracestate" =>?} or {}.
    def message(task, args, kwargs, task_id, queue, priority, reply_to, durable: false, trace: {})
      headers = {
        "lang" => "rb", "task" => task, "id" => task_id, "root_id" => task_id, "parent_id" => nil,
        "group" => nil, "retries" => 0, "eta" => nil, "expires" => nil,
        "origin" => "ruby@#{Socket.gethostname}", SENT_AT_HEADER => Time.now.to_f
      }
      headers["sidekiq_reply"] = reply_request(reply_to) if reply_to
      headers[DURABLE_HEADER] = true if durable
      headers.merge!(trace)
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

    # The trace context to send: traceparent:/tracestate: given, else OpenTelemetry's current one when
    # the opentelemetry-api gem is loaded (this gem does not depend on it), else none.
    def trace_context(traceparent, tracestate)
      if traceparent.nil? && defined?(::OpenTelemetry) && ::OpenTelemetry.respond_to?(:propagation)
        carrier = {}
        ::OpenTelemetry.propagation.inject(carrier)
        traceparent = carrier["traceparent"]
        tracestate ||= carrier["tracestate"]
      end
      return {} if traceparent.nil?
      unless traceparent.is_a?(String) && traceparent.match?(TRACEPARENT)
        raise ArgumentError, "traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), got #{traceparent.inspect}"
      end

      tracestate ? { "traceparent" => traceparent, "tracestate" => tracestate.to_s } : { "traceparent" => traceparent }
    end

    # reply_to: { sidekiq: { class:, queue:, context: } } or { active_job: { class:, queue:, context: } }.
    # class: may be the job class itself; an ActiveJob class's own queue (queue_as) is the default
    # queue, else "default". ActiveJob replies carry this process's locale and time zone, as
    # perform_later would record them.
    def reply_request(reply_to)
      unless reply_to.is_a?(Hash) && reply_to.size == 1 && REPLY_FORMATS.key?(reply_to.keys.first)
        raise ArgumentError, "reply_to must be { sidekiq: {class:, queue:} } or { active_job: {class:, queue:} }"
      end

      kind, spec = reply_to.first
      job_class = spec.fetch(:class) { raise ArgumentError, "reply_to #{kind} needs class:" }
      request = { "class" => job_class.to_s, "queue" => (spec[:queue] || own_queue(job_class) || "default").to_s }
      request["context"] = spec[:context] if spec.key?(:context)
      request.merge!(active_job_settings) if kind == :active_job
      request.merge("format" => REPLY_FORMATS.fetch(kind))
    end

    def own_queue(job_class)
      name = job_class.respond_to?(:queue_name) ? job_class.queue_name : nil
      name.is_a?(String) ? name : nil
    end

    def active_job_settings
      settings = {}
      settings["locale"] = I18n.locale.to_s if defined?(I18n) && I18n.respond_to?(:locale)
      settings["timezone"] = Time.zone.name if Time.respond_to?(:zone) && Time.zone
      settings
    end
  end
end

# frozen_string_literal: true

require "json"
require "redis"
require "securerandom"

module InferenceTasks
  # A finished task's outcome: #value is the task's JSON result.
  Result = Struct.new(:task_id, :state, :value, keyword_init: true)

  # One per process (config/initializers/inference_tasks.rb builds INFERENCE); thread-safe as far as
  # the redis client it is given is.
  class Client
    # redis: a Redis client on the workers' broker (the same REDIS_URL as the workers; a
    # Sentinel-aware Redis.new(...) works the same). max_queue_depth: refuse (QueueFull) to enqueue
    # onto a queue already holding this many waiting messages, all priorities together; nil never checks.
    # durable: true makes every enqueue wait until durable_replicas replicas hold the push (Redis
    # WAIT, at most durable_timeout seconds) and raise NotReplicated otherwise; enqueue(durable:)
    # decides per call.
    # results: a Redis client on the workers' result Redis when INFERENCE_RESULT_REDIS_URL puts results
    # on a Redis of their own (the default reads that variable); nil: results are on redis.
    def initialize(redis: Redis.new(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")), max_queue_depth: nil,
                   durable: false, durable_replicas: 1, durable_timeout: 1.0, results: Client.default_results)
      if max_queue_depth && !(max_queue_depth.is_a?(Integer) && max_queue_depth.positive?)
        raise ArgumentError, "max_queue_depth must be a positive Integer or nil"
      end
      unless results.nil? || results.respond_to?(:eval)
        raise ArgumentError, "results must be a Redis client (on INFERENCE_RESULT_REDIS_URL) or nil"
      end

      @redis = redis
      @results = results || redis
      @max_queue_depth = max_queue_depth
      @durable = durable
      @durable_replicas = Wire.check_durable_replicas(durable_replicas)
      @durable_timeout = Wire.check_durable_timeout(durable_timeout)
      @waiter = ResultWaiter.new(@results)
    end

    # Enqueue inference.embed; returns the task id. Options: queue:, priority: (0-9, 0 is served
    # first), task_id:, reply_to: { active_job: { class: EmbeddingReadyJob, context: {...} } } (or
    # sidekiq: for a plain Sidekiq job). encoding: "f32-base64" asks for the compact result (a
    # quarter of the JSON's size). model: a catalogue alias ("e5"): the task goes to that model's
    # queue ("inference.e5") and names it, so no other model answers it; nil: the default model.
    # prompt_name: one of the model's catalogue prompts ("query"), or prompt: a literal prefix;
    # dimensions: the first N components (Matryoshka); truncate: false fails a text longer than the
    # model reads instead of cutting it (usage["truncated"] lists the cut ones otherwise). cache: false
    # (every enqueue method takes it) asks a worker with the fleet's embedding cache to compute every
    # text and store none; nil sends nothing (the task's default, true).
    def enqueue_embed(texts, normalize: true, encoding: nil, model: nil, prompt_name: nil, prompt: nil,
                      dimensions: nil, truncate: nil, cache: nil, **options)
      kwargs = { "normalize" => normalize }
      kwargs["encoding"] = encoding if encoding
      kwargs.merge!(contract_options(prompt_name: prompt_name, prompt: prompt, dimensions: dimensions,
                                     truncate: truncate, cache: cache))
      enqueue("inference.embed", [texts], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.rerank: documents ordered by relevance to query; returns the task id.
    def enqueue_rerank(query, documents, top_n: nil, return_documents: false, model: nil, truncate: nil, cache: nil,
                       **options)
      kwargs = { "return_documents" => return_documents }
      kwargs["top_n"] = top_n if top_n
      kwargs["truncate"] = truncate unless truncate.nil?
      kwargs["cache"] = cache unless cache.nil?
      enqueue("inference.rerank", [query, documents], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.embed_chunks: long texts split into windows the model reads, each embedded.
    def enqueue_embed_chunks(texts, chunk_tokens: nil, overlap_tokens: 32, normalize: true, encoding: nil, model: nil,
                             prompt_name: nil, prompt: nil, dimensions: nil, cache: nil, **options)
      kwargs = { "overlap_tokens" => overlap_tokens, "normalize" => normalize }
      kwargs["chunk_tokens"] = chunk_tokens if chunk_tokens
      kwargs["encoding"] = encoding if encoding
      kwargs.merge!(contract_options(prompt_name: prompt_name, prompt: prompt, dimensions: dimensions, truncate: nil,
                                     cache: cache))
      enqueue("inference.embed_chunks", [texts], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.embed_sparse on a sparse model's queue (model: its alias, e.g. "splade"): per text
    # {"indices", "values"}; top_k keeps the k largest weights, min_weight drops smaller ones,
    # return_tokens adds each index's word piece.
    def enqueue_embed_sparse(texts, model:, top_k: nil, min_weight: nil, return_tokens: false, prompt_name: nil,
                             prompt: nil, truncate: nil, cache: nil, **options)
      kwargs = { "return_tokens" => return_tokens }
      kwargs["top_k"] = top_k if top_k
      kwargs["min_weight"] = min_weight if min_weight
      kwargs.merge!(contract_options(prompt_name: prompt_name, prompt: prompt, dimensions: nil, truncate: truncate,
                                     cache: cache))
      enqueue("inference.embed_sparse", [texts], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.classify (zero-shot over labels); returns the task id. model, truncate: as for
    # enqueue_embed.
    def enqueue_classify(texts, labels, model: nil, truncate: nil, cache: nil, **options)
      kwargs = truncate.nil? ? {} : { "truncate" => truncate }
      kwargs["cache"] = cache unless cache.nil?
      enqueue("inference.classify", [texts, labels], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.train_classifier on the training queue; returns the task id. Poll #state for
    # "PROGRESS" (#progress gives stage/done/total); the result holds the new head's version and metrics.
    # model: train the head on that catalogue model's embeddings (its trainer's queue, training.<alias>).
    def enqueue_train_classifier(name, texts, labels, test_fraction: 0.2, seed: 0, queue: nil, model: nil,
                                 **options)
      kwargs = { "name" => name, "texts" => texts, "labels" => labels, "test_fraction" => test_fraction, "seed" => seed }
      enqueue("inference.train_classifier", [], with_model(kwargs, model),
              queue: queue || training_queue(model), **options)
    end

    # Enqueue inference.classify with a trained head instead of zero-shot labels.
    def enqueue_classify_with(classifier, texts, version: nil, model: nil, truncate: nil, cache: nil, **options)
      kwargs = { "classifier" => classifier }
      kwargs["classifier_version"] = version if version
      kwargs["truncate"] = truncate unless truncate.nil?
      kwargs["cache"] = cache unless cache.nil?
      enqueue("inference.classify", [texts], with_model(kwargs, model), **for_model(model, options))
    end

    # Enqueue inference.embed_corpus for a large corpus held in a Redis list (RPUSH the texts first).
    # encoding: "f32-base64" (the default, compact) or "json" pages.
    def enqueue_embed_corpus(source_key, page_size: 256, normalize: true, encoding: nil, queue: nil, model: nil,
                             **options)
      kwargs = { "source_key" => source_key, "page_size" => page_size, "normalize" => normalize }
      kwargs["encoding"] = encoding if encoding
      enqueue("inference.embed_corpus", [], with_model(kwargs, model), queue: queue || training_queue(model), **options)
    end

    # A client on INFERENCE_RESULT_REDIS_URL when the environment sets it (the workers' setting), else nil.
    def self.default_results
      url = ENV.fetch("INFERENCE_RESULT_REDIS_URL", "")
      url.empty? ? nil : Redis.new(url: url)
    end

    # {"stage" => ..., "done" => n, "total" => n} while a training task reports PROGRESS, else nil.
    def progress(task_id)
      raw = @results.get(Wire::RESULT_KEY_PREFIX + task_id)
      meta = raw && JSON.parse(raw)
      meta && meta["status"] == "PROGRESS" ? meta["result"] : nil
    end

    # Embed and wait: returns {"model" => ..., "dim" => ..., "embeddings" => [[Float]]}. With
    # encoding: "f32-base64" the vectors travel as float32 bytes and are decoded here into the same
    # shape (plus "count" and "encoding"). The result is deleted from Redis once read (keep: true keeps it).
    # Every encoding is decoded here (InferenceTasks.decode_embeddings): Floats, or Integers for the
    # quantized ones; "usage" => {"tokens", "truncated", "inference_ms", "queue_ms"} comes with it.
    def embed(texts, normalize: true, encoding: "json", timeout: 30, keep: false, **options)
      raise ArgumentError, "encoding must be one of #{Wire::ENCODINGS.inspect}" unless Wire::ENCODINGS.include?(encoding)

      wire = encoding == "json" ? nil : encoding
      value = wait(enqueue_embed(texts, normalize: normalize, encoding: wire, **options), timeout: timeout, keep: keep)
      return value unless value["encoding"]

      value.merge("embeddings" => InferenceTasks.decode_embeddings(value["embeddings"], value["dim"], value["encoding"]))
    end

    # Rerank and wait: {"model", "alias", "method" ("bi-encoder" or "cross-encoder"), "results" =>
    # [{"index", "score", "relevance_score" (the same, Cohere's name), "document"?}] best first, "usage"}.
    def rerank(query, documents, timeout: 30, keep: false, **options)
      wait(enqueue_rerank(query, documents, **options), timeout: timeout, keep: keep)
    end

    # Sparse vectors and wait: {"model", "alias", "dim" (the vocabulary's size), "embeddings" =>
    # [{"indices" => [Integer] ascending, "values" => [Float], "tokens"?}] per text, "usage"}.
    def embed_sparse(texts, timeout: 30, keep: false, **options)
      wait(enqueue_embed_sparse(texts, **options), timeout: timeout, keep: keep)
    end

    # Embed long texts in chunks and wait: "chunks" => one Array per text of {"start", "end",
    # "embedding"} (character span [start, end) in the text; the embedding decoded as for #embed).
    def embed_chunks(texts, encoding: "json", timeout: 60, keep: false, **options)
      raise ArgumentError, "encoding must be one of #{Wire::ENCODINGS.inspect}" unless Wire::ENCODINGS.include?(encoding)

      wire = encoding == "json" ? nil : encoding
      value = wait(enqueue_embed_chunks(texts, encoding: wire, **options), timeout: timeout, keep: keep)
      return value if value["encoding"] == "json"

      chunks = value["chunks"].map do |text_chunks|
        text_chunks.map do |chunk|
          vector = InferenceTasks.decode_embeddings(chunk["embedding"], value["dim"], value["encoding"]).first
          chunk.merge("embedding" => vector)
        end
      end
      value.merge("chunks" => chunks)
    end

    # What a worker of the model's pool is, and wait: {"alias", "revision", "dim", "limits" => {"texts_per_task",
    # "text_chars"}, "model_error", ...} (docs/tasks.md, inference.worker_info). A backfill reads the serving
    # model's identity and its per-task limits from it.
    def worker_info(model: nil, timeout: 30, **options)
      wait(enqueue("inference.worker_info", [], {}, **for_model(model, options)), timeout: timeout)
    end

    # Classify and wait: returns one {"label", "score", "scores"} hash per text, in order.
    def classify(texts, labels, timeout: 30, keep: false, **options)
      wait(enqueue_classify(texts, labels, **options), timeout: timeout, keep: keep)
    end

    # Enqueue any task by wire name with positional args and keyword args; returns the task id.
    # durable: true (or the client's default) returns only once the replicas hold the push, else
    # raises NotReplicated; enqueueing again with the same task_id: is then safe.
    # traceparent:/tracestate: continue a W3C trace in the worker (default: OpenTelemetry's current
    # context when the opentelemetry-api gem is loaded).
    def enqueue(task, args, kwargs = {}, queue: Wire::DEFAULT_QUEUE, priority: 0, task_id: nil, reply_to: nil,
                durable: nil, traceparent: nil, tracestate: nil)
      raise ArgumentError, "priority must be 0..9, got #{priority.inspect}" unless Wire::PRIORITIES.include?(priority)
      raise ArgumentError, "durable must be true, false or nil, got #{durable.inspect}" unless [true, false, nil].include?(durable)

      durable = @durable if durable.nil?
      task_id ||= SecureRandom.uuid
      message = JSON.generate(Wire.message(task, args, kwargs, task_id, queue, priority, reply_to,
                                           durable: durable, trace: Wire.trace_context(traceparent, tracestate)))
      acknowledged = begin
        push(queue, priority, message, durable)
      rescue Redis::BaseConnectionError => e
        raise unless durable

        raise NotReplicated.new(task_id, 0, @durable_replicas, @durable_timeout, "the push failed: #{e.message}")
      end
      if durable && acknowledged < @durable_replicas
        raise NotReplicated.new(task_id, acknowledged, @durable_replicas, @durable_timeout)
      end

      task_id
    end

    # Waiting messages in a queue, all priority lists together.
    def queue_depth(queue = Wire::DEFAULT_QUEUE)
      @redis.pipelined { |pipe| Wire.queue_keys(queue).each { |key| pipe.llen(key) } }.sum
    end

    # The result if the task has finished, else nil. Raises TaskFailed for FAILURE. A finished
    # result is deleted from Redis by the read that returns it, unless keep: true.
    def result(task_id, keep: false)
      meta = @waiter.stored(task_id, keep: keep)
      meta && Result.new(task_id: task_id, state: meta["status"], value: outcome(task_id, meta))
    end

    # The current state: "PENDING" (unknown or not started), "STARTED", "SUCCESS", "FAILURE", ...
    def state(task_id)
      raw = @results.get(Wire::RESULT_KEY_PREFIX + task_id)
      raw.nil? ? "PENDING" : JSON.parse(raw).fetch("status")
    end

    # Wait until the task finishes; returns its JSON result, raises TaskFailed or Timeout. Wakes when
    # the worker stores the result (ResultWaiter: the result backend's pub/sub channel), not on a
    # polling interval; interval: is accepted for callers of earlier versions and unused. The result
    # is deleted from Redis by the read that returns it, unless keep: true.
    def wait(task_id, timeout: 30, interval: nil, keep: false)
      outcome(task_id, @waiter.await(task_id, timeout, keep: keep))
    end

    private

    def contract_options(prompt_name:, prompt:, dimensions:, truncate:, cache: nil)
      options = {}
      options["cache"] = cache unless cache.nil?
      options["prompt_name"] = prompt_name if prompt_name
      options["prompt"] = prompt if prompt
      options["dimensions"] = dimensions if dimensions
      options["truncate"] = truncate unless truncate.nil?
      options
    end

    def with_model(kwargs, model)
      model ? kwargs.merge("model" => model) : kwargs
    end

    def training_queue(model)
      model ? Wire.model_queue(model, Wire::TRAINING_QUEUE) : Wire::TRAINING_QUEUE
    end

    # The model's queue, unless the caller named a queue itself.
    def for_model(model, options)
      model ? { queue: Wire.model_queue(model) }.merge(options) : options
    end

    # Push; with durable, WAIT for the replicas in the same pipeline (one connection, so WAIT covers
    # this push) and return how many acknowledged it.
    def push(queue, priority, message, durable = false)
      target = Wire.priority_key(queue, priority)
      replies = @redis.pipelined do |pipe|
        if @max_queue_depth
          pipe.eval(Wire::PUSH_UNLESS_FULL, keys: [target, *Wire.queue_keys(queue)], argv: [message, @max_queue_depth])
        else
          pipe.lpush(target, message)
        end
        pipe.call("WAIT", @durable_replicas, (@durable_timeout * 1000).round) if durable
      end
      depth = replies.first
      raise QueueFull.new(queue, -depth - 1, @max_queue_depth) if @max_queue_depth && depth.negative?

      durable ? replies.last : 0
    rescue Redis::CommandError => e
      raise unless e.message.include?("OOM")

      raise RedisFull, "Redis is full (maxmemory reached, it refuses writes): nothing was pushed (#{e.message}). " \
                       "Results nobody reads and deletes are the usual cause: see docs/operations.md"
    end

    def outcome(task_id, meta)
      state = meta.fetch("status")
      raise failure(task_id, state, meta["result"]) unless state == "SUCCESS"

      meta["result"]
    end

    def failure(task_id, state, payload)
      if payload.is_a?(Hash)
        message = Array(payload["exc_message"]).join(" ")
        TaskFailed.new(task_id, payload["exc_type"] || state, message, state)
      else
        TaskFailed.new(task_id, state, payload.to_s, state)
      end
    end

  end
end

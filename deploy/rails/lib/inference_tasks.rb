# frozen_string_literal: true

# InferenceTasks: enqueue embedding and classification tasks for inference_tasks' Celery workers
# straight into Redis, and read their results, from Ruby. Depends only on the `redis` gem.
#
# The message format is Celery's protocol v2 as documented in docs/wire-protocol.md; the task
# names and argument shapes are the public contract in docs/tasks.md.

require "redis"

require_relative "inference_tasks/version"
require_relative "inference_tasks/errors"
require_relative "inference_tasks/wire"
require_relative "inference_tasks/result_waiter"
require_relative "inference_tasks/client"
require_relative "inference_tasks/pgvector"
require_relative "inference_tasks/screen"
require_relative "inference_tasks/vector_rows"
require_relative "inference_tasks/vector_sync"
require_relative "inference_tasks/backfill"

module InferenceTasks
  # The public constants of the single-file client, kept for code that used them.
  DEFAULT_QUEUE = Wire::DEFAULT_QUEUE
  TRAINING_QUEUE = Wire::TRAINING_QUEUE
  PRIORITIES = Wire::PRIORITIES
  RESULT_KEY_PREFIX = Wire::RESULT_KEY_PREFIX
  READY_STATES = Wire::READY_STATES
  ENCODINGS = Wire::ENCODINGS

  # Which model made a result's vectors: "alias@revision" (docs/tasks.md: the revision is a digest of the
  # model's files). Stored beside each vector, it tells the rows a new model makes stale.
  def self.model_identity(result)
    model_alias = result["alias"] or raise ArgumentError, "the result names no model alias"
    revision = result["revision"] or raise ArgumentError, "the result names no revision (a worker from before results carried one: upgrade it)"
    "#{model_alias}@#{revision}"
  end

  # Little-endian float32 vectors, base64 (inference.embed with encoding: "f32-base64"): one Array per text.
  def self.decode_vectors(base64, dim)
    decode_embeddings(base64, dim, "f32-base64")
  end

  # Any packed encoding of inference.embed / embed_chunks, one Array per vector: Floats for
  # "f32-base64"; Integers for "int8" (-128..127) and "uint8" (0..255), one per dimension; for
  # "binary" (signed) and "ubinary" (unsigned) the sign bits packed 8 per byte, ceil(dim / 8) per
  # vector, as sentence-transformers' quantize_embeddings returns them. "json" values pass through.
  def self.decode_embeddings(payload, dim, encoding)
    return payload if encoding == "json"

    directive, width = Wire::PACKED.fetch(encoding) { raise ArgumentError, "unknown encoding #{encoding.inspect}" }
    per_vector = width == :bits ? (dim + 7) / 8 : dim
    payload.unpack1("m").unpack(directive).each_slice(per_vector).to_a
  end
end

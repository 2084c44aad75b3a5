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
require_relative "inference_tasks/client"

module InferenceTasks
  # The public constants of the single-file client, kept for code that used them.
  DEFAULT_QUEUE = Wire::DEFAULT_QUEUE
  TRAINING_QUEUE = Wire::TRAINING_QUEUE
  PRIORITIES = Wire::PRIORITIES
  RESULT_KEY_PREFIX = Wire::RESULT_KEY_PREFIX
  READY_STATES = Wire::READY_STATES
  ENCODINGS = Wire::ENCODINGS

  # Little-endian float32 vectors, base64 (inference.embed with encoding: "f32-base64"): one Array per text.
  def self.decode_vectors(base64, dim)
    base64.unpack1("m").unpack("e*").each_slice(dim).to_a
  end
end

# frozen_string_literal: true

# Driven by tests/worker/test_microbatch.py: a Rails-style burst of one-text embeds (enqueue all, then
# wait), the after_commit pattern that micro-batching serves; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
texts = JSON.parse(ENV.fetch("TEXTS"))
ids = texts.map { |text| client.enqueue_embed([text]) }
vectors = ids.map { |id| client.wait(id, timeout: 120)["embeddings"][0] }
puts JSON.generate({ "vectors" => vectors })

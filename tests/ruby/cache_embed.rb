# frozen_string_literal: true

# Driven by tests/worker/test_cache.py: the gem's `cache:` argument on a worker with the embedding cache;
# prints each call's usage["cached"] as one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
texts = JSON.parse(ENV.fetch("TEXTS"))
report = {
  "first" => client.embed(texts)["usage"]["cached"],
  "second" => client.embed(texts)["usage"]["cached"],
  "bypassed" => client.embed(texts, cache: false)["usage"]["cached"],
  "classify_bypassed" => client.classify(texts, %w[billing delivery], cache: false).first["usage"]["cached"],
  "rerank" => client.rerank("a parcel the gem asks about", texts)["usage"]["cached"]
}
puts JSON.generate(report)

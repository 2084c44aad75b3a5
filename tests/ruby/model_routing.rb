# frozen_string_literal: true

# Driven by tests/worker/test_model_pools.py: the Ruby client routes model: "twin" to twin's pool (queue
# inference.twin) and no model to the default pool; a bad alias is refused before anything is sent.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")), max_queue_depth: 100)
text = "My invoice was charged twice this month."
twin = client.embed([text], model: "twin", timeout: 60)
default = client.embed([text], timeout: 60)
compact = client.embed([text], model: "twin", encoding: "f32-base64", timeout: 60)
labels = client.classify([text], %w[billing shipping], model: "twin", timeout: 60)
queued = client.enqueue_embed([text], model: "twin")
refused = begin
  client.enqueue_embed([text], model: "Not An Alias")
  nil
rescue ArgumentError => e
  e.message
end
client.wait(queued, timeout: 60)
puts JSON.generate(
  {
    "twin" => twin.slice("model", "alias"), "default" => default.slice("model", "alias"),
    "same_vector" => twin["embeddings"][0].zip(default["embeddings"][0]).all? { |a, b| (a - b).abs < 1e-5 },
    "compact_alias" => compact["alias"], "compact_dim" => compact["embeddings"][0].size,
    "classify" => labels[0].slice("label", "alias"), "refused" => refused
  }
)

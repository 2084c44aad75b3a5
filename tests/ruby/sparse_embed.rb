# frozen_string_literal: true

# Driven by tests/worker/test_sparse.py: inference.embed_sparse from Ruby on the sparse model "splade", whole
# and pruned to 4 weights with their tokens; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
texts = JSON.parse(ENV.fetch("TEXTS"))
whole = client.embed_sparse(texts, model: "splade")
top = client.embed_sparse(texts, model: "splade", top_k: 4, return_tokens: true)
puts JSON.generate({ "alias" => whole["alias"], "dim" => whole["dim"], "embeddings" => whole["embeddings"],
                     "top" => top["embeddings"] })

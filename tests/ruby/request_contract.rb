# frozen_string_literal: true

# Driven by tests/worker/test_request_contract.py: every encoding decoded by the Ruby client, rerank with
# top_n and return_documents, and chunks of a long text; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
texts = JSON.parse(ENV.fetch("TEXTS"))
report = { "encodings" => {} }
InferenceTasks::ENCODINGS.each do |encoding|
  result = client.embed(texts, encoding: encoding)
  report["encodings"][encoding] = { "dim" => result["dim"], "embeddings" => result["embeddings"] }
end
report["rerank"] = client.rerank(ENV.fetch("QUERY"), texts, top_n: 2, return_documents: true)
report["dimensions"] = client.embed(texts, dimensions: 32, prompt: "query: ")["embeddings"]
report["chunks"] = client.embed_chunks([ENV.fetch("LONG_TEXT")], chunk_tokens: 64, overlap_tokens: 8,
                                       encoding: "int8")["chunks"]
puts JSON.generate(report)

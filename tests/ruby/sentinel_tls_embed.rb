# frozen_string_literal: true

# Driven by tests/worker/test_sentinel_tls.py: the Ruby client on Sentinel-aware redis clients whose
# sentinels and primary listen on TLS only (SENTINEL_PORTS, SENTINEL_MASTER, CA_FILE), with results in
# database RESULTS_DB (the workers' INFERENCE_RESULT_REDIS_URL); prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

sentinels = ENV.fetch("SENTINEL_PORTS").split(",").map { |port| { host: "127.0.0.1", port: Integer(port) } }
# rediss:// makes redis-rb use TLS for the primary and for every sentinel it asks.
over_tls = { sentinels: sentinels, role: :master, ssl_params: { ca_file: ENV.fetch("CA_FILE") } }
redis = Redis.new(url: "rediss://#{ENV.fetch("SENTINEL_MASTER")}/0", **over_tls)
results = Redis.new(url: "rediss://#{ENV.fetch("SENTINEL_MASTER")}/#{ENV.fetch("RESULTS_DB")}", **over_tls)
client = InferenceTasks::Client.new(redis: redis, results: results)
result = client.embed(["through sentinels over TLS, from Ruby"], timeout: 60)
puts JSON.generate({ "dim" => result["dim"], "count" => result["embeddings"].size })

# frozen_string_literal: true

# Driven by tests/worker/test_failover.py: the Ruby client on a Sentinel-aware redis client (the form
# deploy/rails documents), after a failover; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

sentinels = ENV.fetch("SENTINEL_PORTS").split(",").map { |port| { host: "127.0.0.1", port: Integer(port) } }
redis = Redis.new(url: "redis://#{ENV.fetch("SENTINEL_MASTER")}", sentinels: sentinels, role: :master)
client = InferenceTasks::Client.new(redis: redis)
result = client.embed(["after the failover, from Ruby"], timeout: 60)
puts JSON.generate({ "dim" => result["dim"], "count" => result["embeddings"].size,
                     "primary_port" => redis.connection[:port] })

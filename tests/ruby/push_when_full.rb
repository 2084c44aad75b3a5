# frozen_string_literal: true

# Driven by tests/worker/test_results_memory.py while Redis is at maxmemory: the push fails with RedisFull.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
begin
  client.enqueue_embed(["no room"])
  puts JSON.generate({ "error" => nil })
rescue InferenceTasks::Error => e
  puts JSON.generate({ "error" => e.class.name, "message" => e.message })
end

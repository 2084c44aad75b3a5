# frozen_string_literal: true

# Driven by tests/worker/test_results_memory.py: results deleted once read (kept with keep: true), compact
# f32-base64 embeddings, and QueueFull at max_queue_depth; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

redis = Redis.new(url: ENV.fetch("REDIS_URL"))
client = InferenceTasks::Client.new(redis: redis)
key = ->(id) { InferenceTasks::RESULT_KEY_PREFIX + id }
texts = ["The cat sleeps on the sofa.", "Quarterly revenue grew.", "Reset my password"]
report = {}

read = client.enqueue_embed(texts)
report["json"] = client.wait(read, timeout: 60)["embeddings"]
report["read_key_exists"] = redis.exists?(key.call(read))

kept = client.enqueue_embed(texts)
client.wait(kept, timeout: 60, keep: true)
report["kept_key_exists"] = redis.exists?(key.call(kept))
report["kept_ttl"] = redis.ttl(key.call(kept))

compact = client.embed(texts, encoding: "f32-base64", timeout: 60)
report["f32"] = compact["embeddings"]
report["f32_encoding"] = compact["encoding"]

begin
  client.embed([42], timeout: 60)
rescue InferenceTasks::TaskFailed => e
  report["failed_key_exists"] = redis.exists?(key.call(e.task_id))
end

limited = InferenceTasks::Client.new(redis: redis, max_queue_depth: 3)
[0, 5, 9].each { |priority| limited.enqueue_embed(["waiting"], queue: "parked", priority: priority) }
report["parked_before"] = limited.queue_depth("parked")
begin
  limited.enqueue_embed(["one too many"], queue: "parked", priority: 2)
rescue InferenceTasks::QueueFull => e
  report["queue_full"] = { "class" => e.class.name, "message" => e.message, "depth" => e.depth, "limit" => e.limit,
                           "is_error" => e.is_a?(InferenceTasks::Error) }
end
report["parked_after"] = limited.queue_depth("parked")
report["parked_lists"] = (0..9).to_h { |p| [p, redis.llen(p.zero? ? "parked" : "parked:#{p}")] }
puts JSON.generate(report)

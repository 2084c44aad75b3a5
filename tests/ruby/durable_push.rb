# frozen_string_literal: true

# Driven by tests/worker/test_durable.py: durable pushes to a primary with or without a replica. Prints the
# outcome of a durable embed (its task id, or the error), a retry with the same task id, and the
# client's refusal of bad durable options.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")), durable: true,
                                    durable_timeout: 0.3)
outcome = {}
task_id = ENV.fetch("TASK_ID")
begin
  outcome["task_id"] = client.enqueue_embed(["durable from ruby"], task_id: task_id)
  outcome["error"] = nil
rescue InferenceTasks::NotReplicated => e
  outcome["error"] = e.class.name
  outcome["message"] = e.message
  outcome["acknowledged"] = e.acknowledged
end
outcome["value"] = client.wait(task_id, timeout: 60) if ENV["WAIT"] == "1"
outcome["bad_options"] = [
  [{ durable_replicas: 0 }, :initialize], [{ durable_timeout: 0 }, :initialize], [{ durable: "yes" }, :enqueue]
].map do |options, where|
  where == :initialize ? InferenceTasks::Client.new(redis: Redis.new, **options) : client.enqueue_embed(["x"], **options)
  nil
rescue ArgumentError => e
  e.message
end
puts JSON.generate(outcome)

# frozen_string_literal: true

# Driven by tests/worker/test_tracing.py: inference.embed tasks from Ruby, each continuing the trace its
# traceparent names (TRACEPARENTS), all enqueued before any is awaited (so the worker batches them);
# the last also asks for a Sidekiq reply job on queue "traced". Prints the task ids.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
parents = JSON.parse(ENV.fetch("TRACEPARENTS"))
ids = parents.each_with_index.map do |parent, index|
  reply = index == parents.size - 1 ? { sidekiq: { class: "TracedReplyJob", queue: "traced" } } : nil
  client.enqueue_embed(["traced text number #{index}", "a second text"], traceparent: parent, reply_to: reply)
end
ids[0...-1].each { |id| client.wait(id, timeout: 60) }
refused = begin
  client.enqueue_embed(["x"], traceparent: "not-a-traceparent")
  nil
rescue ArgumentError => e
  e.message
end
puts JSON.generate({ "ids" => ids, "refused" => refused })

# frozen_string_literal: true

# Enqueue one good and one bad embed task asking for Sidekiq replies; prints their task ids.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
reply = { sidekiq: { class: "EmbeddingReadyJob", queue: "replies", context: { "record_id" => 42 } } }
good = client.enqueue_embed(["An embedding that travels back to Rails."], reply_to: reply)
bad = client.enqueue_embed("not a list", reply_to: reply)
puts JSON.generate({ "good" => good, "bad" => bad })

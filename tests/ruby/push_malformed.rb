# frozen_string_literal: true

# A careless producer: valid tasks through the client, malformed ones pushed raw around them.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

redis = Redis.new(url: ENV.fetch("REDIS_URL"))
client = InferenceTasks::Client.new(redis: redis)
ids = []
malformed = [
  "not json at all",
  JSON.generate({ "body" => "!!!", "headers" => { "id" => SecureRandom.uuid, "task" => "inference.embed" } }),
  JSON.generate({ "content-type" => "application/json", "headers" => {}, "properties" => {} }),
  JSON.generate([1, 2, 3])
]
malformed.each do |raw|
  ids << client.enqueue_embed(["valid before"])
  redis.lpush("inference", raw)
  ids << client.enqueue_embed(["valid after"])
end
results = ids.map { |id| client.wait(id, timeout: 60)["dim"] }
puts JSON.generate({ "dims" => results })

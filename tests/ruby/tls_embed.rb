# frozen_string_literal: true

# Driven by tests/worker/test_app.py: the Ruby client over rediss:// with a password and a private CA
# (REDIS_URL, CA_FILE); prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

redis = Redis.new(url: ENV.fetch("REDIS_URL"), ssl_params: { ca_file: ENV.fetch("CA_FILE") })
client = InferenceTasks::Client.new(redis: redis, max_queue_depth: 100)
result = client.embed(["over TLS, from Ruby"], timeout: 60)
refused = begin
  Redis.new(url: ENV.fetch("REDIS_URL")).ping # the system's CAs do not know the test's CA
  nil
rescue StandardError => e
  e.class.name
end
puts JSON.generate({ "dim" => result["dim"], "count" => result["embeddings"].size,
                     "without_the_ca" => refused })

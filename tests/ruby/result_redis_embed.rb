# frozen_string_literal: true

# Driven by tests/worker/test_result_redis.py: the Ruby client with results on a Redis of their own
# (REDIS_URL: the broker; RESULTS_URL: rediss:// with a password, CA_FILE: its CA); prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

broker = Redis.new(url: ENV.fetch("REDIS_URL"))
results = Redis.new(url: ENV.fetch("RESULTS_URL"), ssl_params: { ca_file: ENV.fetch("CA_FILE") })
client = InferenceTasks::Client.new(redis: broker, results: results)
task_id = client.enqueue_embed(["from Ruby", "results elsewhere"])
value = client.wait(task_id, timeout: 60)
puts JSON.generate({ "dim" => value["dim"], "count" => value["embeddings"].size,
                     "state_after_read" => client.state(task_id),
                     "on_the_broker" => broker.exists?(InferenceTasks::RESULT_KEY_PREFIX + task_id) })

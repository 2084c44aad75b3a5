# frozen_string_literal: true

# Driven by tests/external/test_gem_wakeup.py: the gem's blocking wait (Client#wait, and a blocking call's
# push) on a real Redis, the result stored by Python's result backend. TASK_ID, TIMEOUT (seconds),
# REPEAT (waits one after another), PUSH=1 (a blocking embed with that task id; nothing consumes the
# queue), SENTINEL_PORTS/SENTINEL_MASTER (a Sentinel-aware client). Prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

redis = if ENV["SENTINEL_PORTS"]
          sentinels = ENV.fetch("SENTINEL_PORTS").split(",").map { |port| { host: "127.0.0.1", port: Integer(port) } }
          Redis.new(url: "redis://#{ENV.fetch("SENTINEL_MASTER")}", sentinels: sentinels, role: :master, id: "gem-wait")
        else
          Redis.new(url: ENV.fetch("REDIS_URL"), id: "gem-wait")
        end
client = InferenceTasks::Client.new(redis: redis, results: nil, max_queue_depth: ENV["MAX_DEPTH"]&.to_i)
waiter = client.instance_variable_get(:@waiter)
outcomes = Integer(ENV.fetch("REPEAT", "1")).times.map do
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  outcome = begin
    value = if ENV["PUSH"] == "1"
              client.embed(["never consumed"], task_id: ENV.fetch("TASK_ID"), queue: ENV.fetch("QUEUE", "inference"),
                                               timeout: Float(ENV.fetch("TIMEOUT")))
            else
              client.wait(ENV.fetch("TASK_ID"), timeout: Float(ENV.fetch("TIMEOUT")), keep: ENV["KEEP"] == "1")
            end
    { "value" => value }
  rescue InferenceTasks::Error => e
    { "error" => e.class.name, "message" => e.message }
  end
  outcome.merge("waited_s" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
end
# What the waits left behind, seen by Redis: subscribers of the task's channel, this process's connections.
channel = InferenceTasks::Wire::RESULT_KEY_PREFIX + ENV.fetch("TASK_ID")
subscribers = redis.call("PUBSUB", "NUMSUB", channel).last
connections = redis.call("CLIENT", "LIST").lines.count { |line| line.include?(" name=gem-wait ") }
puts JSON.generate({ "outcomes" => outcomes, "idle_connections" => waiter.idle_connections,
                     "subscribers" => subscribers, "connections" => connections })

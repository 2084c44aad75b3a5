# frozen_string_literal: true

# The chaos soak's Ruby producer (benchmarks/chaos.py): durable one-text embeds (enqueue_embed with
# durable: true) at RATE per second through a Sentinel-aware redis client, until the file STOP exists.
# A refused push (NotReplicated, Redis full, a lost connection during a failover) is retried with the
# same task id, as the gem's README says. Each confirmed push is one JSON line in OUT; the last line
# printed is a summary.
$LOAD_PATH.unshift(File.expand_path("../deploy/rails/lib", __dir__))
require "inference_tasks"

sentinels = ENV.fetch("SENTINEL_PORTS").split(",").map { |port| { host: "127.0.0.1", port: Integer(port) } }
redis = Redis.new(url: "redis://#{ENV.fetch("SENTINEL_MASTER")}", sentinels: sentinels, role: :master,
                  reconnect_attempts: 0)
client = InferenceTasks::Client.new(redis: redis, durable: true, results: redis)
texts = File.readlines(File.expand_path("../data/support_tickets.jsonl", __dir__)).map { |line| JSON.parse(line)["text"] }
pause = 1.0 / Float(ENV.fetch("RATE"))
stop = ENV.fetch("STOP")
sent = 0
errors = Hash.new(0)
File.open(ENV.fetch("OUT"), "a") do |out|
  out.sync = true
  turn = 0
  until File.exist?(stop)
    task_id = SecureRandom.uuid
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 120
    begin
      client.enqueue_embed([texts[turn % texts.size]], task_id: task_id)
      out.puts(JSON.generate({ "id" => task_id, "sent_at" => Time.now.to_f }))
      sent += 1
    rescue InferenceTasks::Error, Redis::BaseError => e
      errors[e.class.name] += 1
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        sleep(0.2)
        retry
      end
      out.puts(JSON.generate({ "error" => "gave up" }))
    end
    turn += 1
    sleep(pause)
  end
end
puts JSON.generate({ "sent" => sent, "errors" => errors })

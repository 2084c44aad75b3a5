# frozen_string_literal: true

# The soak benchmark's Ruby producer (benchmarks/soak.py): embeds 64-text batches in a closed loop for
# ARGV[0] seconds the documented way (Client#embed: the result is deleted by the read that returns it),
# counting each result in the Redis key ARGV[1]; prints {"results", "errors"} at the end.
$LOAD_PATH.unshift(File.expand_path("../deploy/rails/lib", __dir__))
require "inference_tasks"

seconds = Float(ARGV.fetch(0))
done_key = ARGV.fetch(1)
redis = Redis.new(url: ENV.fetch("REDIS_URL"))
client = InferenceTasks::Client.new(redis: redis)
texts = File.readlines(File.expand_path("../data/support_tickets.jsonl", __dir__)).map { |line| JSON.parse(line)["text"] }
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
results = 0
errors = 0
turn = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  batch = texts.rotate(turn * 64).first(64)
  begin
    raise "got #{vectors.size} vectors" unless (vectors = client.embed(batch, timeout: 300)["embeddings"]).size == 64

    results += 1
    redis.incr(done_key)
  rescue InferenceTasks::Error, RuntimeError => e
    errors += 1
    warn "ruby producer: #{e.class}: #{e.message}"
  end
  turn += 1
end
puts JSON.generate({ "results" => results, "errors" => errors })

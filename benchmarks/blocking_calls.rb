# frozen_string_literal: true

# The Ruby side of benchmarks/blocking_calls.py: ARGV[0] blocking one-text `embed` calls the way a Rails
# request makes them (Client#embed: push, wait, the result deleted by the read), each a moment
# (ARGV[1] seconds) after the previous one returned; ARGV[2] warm-up calls first. Prints the calls'
# wall times in ms as one JSON list.
$LOAD_PATH.unshift(File.expand_path("../deploy/rails/lib", __dir__))
require "inference_tasks"

count = Integer(ARGV.fetch(0))
pause = Float(ARGV.fetch(1))
warm = Integer(ARGV.fetch(2))
client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
texts = File.readlines(File.expand_path("../data/support_tickets.jsonl", __dir__)).map { |line| JSON.parse(line)["text"] }
took = (warm + count).times.map do |index|
  sleep(pause)
  began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  client.embed([texts[index % texts.size]], timeout: 60)
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - began) * 1000
end
puts JSON.generate(took.drop(warm))

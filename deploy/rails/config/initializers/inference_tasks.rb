# frozen_string_literal: true

# config/initializers/inference_tasks.rb
# One client per process (the gem: gem "inference_tasks" in the Gemfile). Redis is the workers'
# broker: the same REDIS_URL the workers use; it can be Sidekiq's Redis. For a Sentinel-managed
# Redis pass a Sentinel-aware client instead:
#   Redis.new(url: "redis://mymaster", sentinels: [{ host: "10.0.0.1", port: 26379 }, ...], role: :master)
INFERENCE = InferenceTasks::Client.new(
  redis: Redis.new(url: ENV.fetch("INFERENCE_REDIS_URL", ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0"))),
  # Refuse (InferenceTasks::QueueFull) instead of piling work onto a backlog nobody drains.
  max_queue_depth: Integer(ENV.fetch("INFERENCE_MAX_QUEUE_DEPTH", "1000")),
  # Where the workers store results when INFERENCE_RESULT_REDIS_URL gives them a Redis of their own
  # (the default reads that variable; nil: results are on the broker's Redis).
  results: InferenceTasks::Client.default_results
)

# frozen_string_literal: true

# config/initializers/inference_tasks.rb
# One client per process; Redis is the workers' broker (the same REDIS_URL the workers use).
require Rails.root.join("lib/inference_tasks")

Rails.application.config.to_prepare do
  INFERENCE = InferenceTasks::Client.new(
    redis: Redis.new(url: ENV.fetch("INFERENCE_REDIS_URL", ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")))
  )
end

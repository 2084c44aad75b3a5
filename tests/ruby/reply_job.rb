# frozen_string_literal: true

# Loaded by a real Sidekiq process in tests/external/test_ruby_client.py: records every reply it receives.
require "json"
require "sidekiq"

class EmbeddingReadyJob
  include Sidekiq::Worker

  def perform(outcome)
    Sidekiq.redis do |redis|
      redis.set("test:sidekiq-reply:#{outcome['task_id']}", JSON.generate(outcome))
    end
  end
end

# frozen_string_literal: true

# The gem's minitest suite. It talks to a real Redis and a real inference_tasks worker (and the
# trainer, for the training test): REDIS_URL must point at their broker. In this repository,
# tests/external/test_gem.py starts both and runs it; by hand:
#   REDIS_URL=redis://127.0.0.1:6379/0 ruby -Ilib -Itest -e 'Dir["test/*_test.rb"].each { |f| require File.expand_path(f) }'
# (from deploy/rails, with `inference-tasks worker` and `inference-tasks trainer` running).
require "minitest/autorun"
require "json"
require "securerandom"
require "inference_tasks"

module InferenceTasksTest
  TIMEOUT = 60

  def redis
    @redis ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end

  def client(**options)
    InferenceTasks::Client.new(redis: redis, **options)
  end

  # A queue no worker consumes, for tests that must see messages stay put.
  def idle_queue
    "minitest-idle-#{SecureRandom.hex(4)}"
  end

  # The result the worker stored for `task_id` once it is final (the reply job is pushed just before
  # the final state is written, so a reader of the reply may look a moment too early).
  def final_result(task_id, timeout: TIMEOUT)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      raw = redis.get("celery-task-meta-#{task_id}")
      meta = raw && JSON.parse(raw)
      return meta if meta && %w[SUCCESS FAILURE REVOKED].include?(meta["status"])
      flunk "no final result for #{task_id} within #{timeout} s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end

  # The reply job the worker pushed onto Sidekiq queue `queue`, decoded (waits up to `timeout` s).
  def reply_job(queue, timeout: TIMEOUT)
    _key, raw = redis.brpop("queue:#{queue}", timeout: timeout)
    refute_nil raw, "no reply job arrived on queue:#{queue} within #{timeout} s"
    JSON.parse(raw)
  end
end

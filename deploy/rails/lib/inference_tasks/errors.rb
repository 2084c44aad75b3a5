# frozen_string_literal: true

module InferenceTasks
  # Base class of everything this client raises.
  class Error < StandardError; end

  # The task ran (or was refused) and failed; #remote_type and #message come from the worker.
  class TaskFailed < Error
    attr_reader :task_id, :remote_type, :state

    def initialize(task_id, remote_type, message, state = "FAILURE")
      @task_id = task_id
      @remote_type = remote_type
      @state = state
      super("#{remote_type}: #{message}")
    end
  end

  # No result arrived within the timeout; the task may still run later.
  class Timeout < Error; end

  # The queue already holds max_queue_depth waiting messages (all priorities); nothing was pushed.
  class QueueFull < Error
    attr_reader :queue, :depth, :limit

    def initialize(queue, depth, limit)
      @queue = queue
      @depth = depth
      @limit = limit
      super("queue #{queue.inspect} holds #{depth} waiting messages, at or over max_queue_depth=#{limit}; " \
            "nothing was pushed: retry later, or add workers")
    end
  end

  # Redis refused the write: it is at maxmemory with noeviction. Nothing was pushed.
  class RedisFull < Error; end

  # A durable push (durable: true) was not acknowledged by enough replicas in time. The task may or
  # may not exist; enqueueing again with the same task_id: is safe (a worker runs one message per
  # durable task id).
  class NotReplicated < Error
    attr_reader :task_id, :acknowledged, :replicas

    def initialize(task_id, acknowledged, replicas, timeout, cause = nil)
      @task_id = task_id
      @acknowledged = acknowledged
      @replicas = replicas
      why = cause || "#{acknowledged} of #{replicas} replicas acknowledged it within #{timeout} s"
      super("task #{task_id} was pushed but not confirmed durable (#{why}): it may or may not exist; " \
            "enqueue it again with task_id: #{task_id.inspect} (safe: a worker runs one message per durable " \
            "task id), and check the replicas (docs/reliability.md)")
    end
  end
end

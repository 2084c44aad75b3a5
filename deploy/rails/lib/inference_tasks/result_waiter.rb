# frozen_string_literal: true

require "json"

module InferenceTasks
  # Waits for a task's result by listening on the channel the workers' result backend publishes every
  # stored state on (Celery's Redis backend: PUBLISH to the result's own key, "celery-task-meta-<id>"),
  # so a blocking call wakes when its result is stored instead of on a polling interval.
  #
  # A wait subscribes, then reads the stored result once: a result stored before the subscription is
  # found by the read, one stored after it arrives as a message. A blocking call pushes first and then
  # waits, so both round trips happen while the worker computes and neither adds to the call
  # (subscribing before the push put one on the call's path: ~1 ms after an idle moment, measured in
  # docs/benchmarks-log.md, "Blocking calls"). A subscription's read timeout restarts with every message,
  # so a state not final yet (STARTED, PROGRESS) that comes more than REFRESH_AFTER_S after subscribing
  # ends the subscription and starts one with the time left (the read after it closes the gap): the
  # timeout holds to within that. A lost connection (a Sentinel failover) subscribes again, and reads
  # again, until the deadline.
  #
  # Each wait holds a connection of its own (a Redis client made with the results client's own
  # options: Sentinel, TLS and ACL user alike), taken from a small pool of idle ones. A wait that ends
  # cleanly (a result or a failure) unsubscribes and returns it; one interrupted mid-way (an
  # exception from outside, Thread#kill) closes it. Nothing stays subscribed after a wait.
  class ResultWaiter
    # Idle subscriber connections kept for the next waits (more threads than this open their own).
    IDLE_CONNECTIONS = 8
    # Between attempts to subscribe again while the results Redis is unreachable (a failover).
    RECONNECT_PAUSE_S = 0.1
    # A subscription's read timeout restarts with every message: one that brings a state not final yet
    # this long after subscribing ends the subscription, and a new one waits the time left.
    REFRESH_AFTER_S = 0.05

    def initialize(results)
      @results = results
      @idle = []
      @lock = Mutex.new
      @pid = Process.pid
    end

    # The stored meta (a Hash) of task_id's final state (SUCCESS, FAILURE, REVOKED); raises Timeout
    # after timeout seconds. keep: false deletes the result once read.
    def await(task_id, timeout, keep:)
      deadline = monotonic + timeout
      lost_before = false
      loop do
        left = deadline - monotonic
        raise Timeout, "task #{task_id} did not finish within #{timeout} s" if left <= 0

        outcome = listen_once(task_id, left, keep)
        return outcome[:meta] if outcome[:meta]

        # A connection lost twice in a row: the Redis is failing over; pause before the next try.
        sleep([RECONNECT_PAUSE_S, deadline - monotonic].min.clamp(0, nil)) if outcome[:lost] && lost_before
        lost_before = outcome[:lost]
      end
    end

    # The stored meta of task_id's final state, read once (nil while there is none); deleted from Redis by
    # that read (one Lua script; a state not final yet is never removed) unless keep.
    def stored(task_id, keep:)
      key = Wire::RESULT_KEY_PREFIX + task_id
      final(keep ? @results.get(key) : @results.eval(Wire::READ_FINISHED_RESULT, keys: [key]))
    end

    # How many idle subscriber connections the pool holds (for tests and diagnostics).
    def idle_connections
      @lock.synchronize { @idle.size }
    end

    private

    # One subscription: first the stored result (it may have come before the subscription), then each
    # published state. Its outcome: meta: on a final state; lost: the connection was lost (try again);
    # nothing else: start again.
    def listen_once(task_id, left, keep)
      key = Wire::RESULT_KEY_PREFIX + task_id
      outcome = {}
      subscribed_at = monotonic
      with_connection do |connection|
        subscribe(connection, key, left) do |event, payload|
          meta = event == :subscribed ? stored(task_id, keep: keep) : published(key, payload, keep)
          next :stop if (outcome[:meta] = meta)

          # A state not final yet (STARTED) restarts the read timeout: past REFRESH_AFTER_S, start again
          # with the time left, so the deadline holds within that; sooner, keep listening (no round trip).
          event == :message && monotonic - subscribed_at > REFRESH_AFTER_S ? :stop : :listen
        end
      end
      outcome
    rescue Redis::TimeoutError
      {}
    rescue Redis::BaseConnectionError
      { lost: true }
    end

    # A published state: the meta when final (deleted from Redis unless keep), else nil (start again).
    def published(key, raw, keep)
      meta = final(raw)
      @results.del(key) if meta && !keep
      meta
    end

    # The parsed meta of a final state; nil for none or a state not final yet.
    def final(raw)
      meta = raw && JSON.parse(raw)
      meta.is_a?(Hash) && Wire::READY_STATES.include?(meta["status"]) ? meta : nil
    end

    # SUBSCRIBE key on connection for at most `left` seconds (no reconnection inside: the caller
    # subscribes again and reads again, so nothing stored meanwhile is missed); yields :subscribed,
    # then :message with each payload, until the block answers :stop. Exactly one UNSUBSCRIBE is sent,
    # so the connection is clean afterwards.
    def subscribe(connection, key, left)
      unsubscribing = false
      connection.without_reconnect do
        connection.subscribe_with_timeout(left, key) do |on|
          on.subscribe do |_channel, _count|
            next if unsubscribing

            unsubscribing = yield(:subscribed, nil) == :stop
            connection.unsubscribe(key) if unsubscribing
          end
          on.message do |_channel, payload|
            next if unsubscribing

            unsubscribing = yield(:message, payload) == :stop
            connection.unsubscribe(key) if unsubscribing
          end
        end
      end
    end

    def with_connection
      connection = checkout
      clean = false
      begin
        result = yield connection
        clean = true
        result
      ensure
        clean ? checkin(connection) : connection.close
      end
    end

    def checkout
      @lock.synchronize do
        if @pid != Process.pid # a forked process never shares its parent's sockets
          @idle = []
          @pid = Process.pid
        end
        @idle.pop
      end || @results.dup
    end

    def checkin(connection)
      kept = @lock.synchronize { @idle.size < IDLE_CONNECTIONS && @pid == Process.pid && @idle.push(connection) }
      connection.close unless kept
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

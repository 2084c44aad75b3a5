# frozen_string_literal: true

module InferenceTasks
  # Embeds the rows of a table that are due (VectorRows#due: no vector or another model's, or a mark older than
  # requeue_after whatever the row holds), in batches, each batch one embed task whose reply job stores its
  # vectors (VectorSync#settle). Each batch is claimed in a short transaction that locks its rows, reads their
  # texts again and marks them; the task is pushed after that commits, with exactly those texts. Killed midway
  # and run again, it picks up where it was: stored rows are no longer due, rows whose task is out are left to
  # it (until requeue_after), and a batch whose push failed had its marks expired so it is asked for at once.
  # Run it on a schedule too (every few minutes): it is what asks again for a row whose task was lost.
  #
  #   InferenceTasks::Backfill.new(sync: Article.embeddings, dimensions: 384).run
  #
  # The serving model (its identity, vector width and per-task limits) comes from the fleet: one worker_info
  # call on the model's queue. Texts the worker would refuse (blank as it defines it, longer than its limit)
  # are skipped, their vector cleared and the reason logged; batch_size above the model's per-task limit is
  # capped to it. Backpressure: the client's max_queue_depth refuses a push onto a full queue (QueueFull); the
  # backfill waits (50 ms doubling to 1 s, outside any transaction) and claims and pushes again, for at most
  # max_wait seconds per push; the first call waits the same way.
  class Backfill
    Report = Struct.new(:identity, :batch_size, :stale, :waiting, :due, :enqueued, :batches, :skipped, :waits,
                        keyword_init: true)

    def initialize(sync:, dimensions: nil, batch_size: 32, requeue_after: 600, max_wait: 300, relation: nil,
                   timeout: 60)
      raise ArgumentError, "batch_size must be a positive Integer, got #{batch_size.inspect}" unless
        batch_size.is_a?(Integer) && batch_size.positive?
      raise ArgumentError, "requeue_after must be a positive number of seconds, got #{requeue_after.inspect}" unless
        requeue_after.is_a?(Numeric) && requeue_after.positive?
      raise ArgumentError, "max_wait must be a number of seconds >= 0, got #{max_wait.inspect}" unless
        max_wait.is_a?(Numeric) && !max_wait.negative?

      @sync, @rows = sync, sync.rows
      @dimensions, @batch_size, @requeue_after, @max_wait = dimensions, batch_size, requeue_after, max_wait
      @relation = relation || @rows.model_class.all
      @timeout = timeout
    end

    # Run to the end of the table; yields the Report after each batch. Returns the final Report.
    def run
      report = Report.new(enqueued: 0, batches: 0, skipped: 0, waits: 0)
      info = serving_model(report)
      limits = info.fetch("limits") { raise Error, "the worker names no limits (a worker from before worker_info said them: upgrade it)" }
      report.identity = InferenceTasks.model_identity(info)
      report.batch_size = batch_size_for(limits.fetch("texts_per_task"), info["alias"])
      cutoff = Time.now.utc - @requeue_after
      stale = @rows.stale(report.identity, @relation)
      report.stale = stale.count
      report.waiting = @rows.waiting(stale, cutoff).count
      due = @rows.due(report.identity, cutoff, @relation)
      report.due = due.count
      log("backfill: #{report.due} rows due for #{report.identity} (#{report.stale} stale, #{report.waiting} of them " \
          "with a task out; marks older than #{@requeue_after} s asked again)")
      each_batch(due, report.batch_size) do |ids|
        enqueue(ids, report.identity, cutoff, limits.fetch("text_chars"), report)
        yield report if block_given?
      end
      log("backfill: done, #{report.enqueued} rows in #{report.batches} tasks, #{report.skipped} skipped (refused " \
          "texts), #{report.waits} waits on a full queue")
      report
    end

    private

    # The model serving the queue now (worker_info: "alias@revision", its width, its limits); its width must be
    # the column's.
    def serving_model(report)
      info = with_room(report, "the serving model's probe") do
        @sync.client.worker_info(model: @sync.model, timeout: @timeout)
      end
      raise Error, "the serving worker's model failed to load: #{info['model_error']}" if info["model_error"]
      if @dimensions && info["dim"] != @dimensions
        raise Error, "the serving model #{info['alias']} makes #{info['dim']}-dimensional vectors; the column " \
                     "holds #{@dimensions}: add a column of the new width (and its index) before switching models"
      end
      info
    end

    def batch_size_for(limit, model_alias)
      return @batch_size if @batch_size <= limit

      log("backfill: batch_size #{@batch_size} is more than the #{limit} texts a task of #{model_alias} may carry " \
          "(the fleet's limit); using #{limit}", :warn)
      limit
    end

    # Ids in primary-key order, each batch read after the last one's id, so rows done meanwhile drop out.
    def each_batch(relation, size)
      key = @rows.primary_key
      table = @rows.model_class.arel_table
      last = nil
      loop do
        scope = relation.order(key => :asc).limit(size)
        scope = scope.where(table[key].gt(last)) unless last.nil?
        ids = scope.pluck(key)
        break if ids.empty?

        last = ids.last
        yield ids
      end
    end

    # Claim the batch's rows that are still due (their texts read under the claim's lock) and push them; a
    # full queue expires the claim's marks, and after the wait the batch is claimed again: a row edited
    # meanwhile carries its own request's mark and drops out, and every text pushed is the one just read.
    def enqueue(ids, identity, cutoff, max_chars, report)
      pending = ids
      with_room(report, "the batch") do
        claim = @rows.claim(@rows.due(identity, cutoff, @rows.model_class.where(@rows.primary_key => pending)),
                            max_chars: max_chars)
        skip(claim.refused, report)
        pending -= claim.refused.map(&:first)
        next if claim.ids.empty?

        push(claim)
        report.enqueued += claim.ids.size
        report.batches += 1
      end
    end

    def push(claim)
      @sync.push(claim)
    rescue StandardError
      @rows.expire(claim.task_id) # nothing (QueueFull), or maybe nothing, was pushed: ask again, not in 600 s
      raise
    end

    def skip(refused, report)
      return if refused.empty?

      report.skipped += refused.size
      refused.each { |id, reason| log("backfill: skipped #{@rows.model_class.table_name} #{id}: #{reason}", :warn) }
    end

    # The block's value; on QueueFull, wait (50 ms doubling to 1 s) and run it again, for at most max_wait s.
    def with_room(report, what)
      waited = 0.0
      delay = 0.05
      begin
        yield
      rescue QueueFull => e
        raise if waited >= @max_wait

        report.waits += 1
        log("backfill: #{what}: #{e.message}; pushing again in #{delay} s", :debug)
        sleep(delay)
        waited += delay
        delay = [delay * 2, 1.0].min
        retry
      end
    end

    def log(message, level = :info)
      @sync.logger&.public_send(level, message)
    end
  end
end

# frozen_string_literal: true

module InferenceTasks
  # Embeds the rows of a table that have no vector or a stale one (VectorRows), in batches of texts, each
  # batch one embed task whose ActiveJob reply stores its vectors. Killed midway and run again, it picks up
  # where it was: finished rows are no longer stale, rows whose task is still out are left to it (until
  # requeue_after), and a batch marked but never pushed was rolled back with its transaction.
  #
  #   InferenceTasks::Backfill.new(client: INFERENCE, rows: Article.embedding_rows, text: :title,
  #                                reply_job: EmbeddingReadyJob).run
  #
  # Backpressure: the client's max_queue_depth refuses a push onto a full queue (QueueFull); the backfill
  # waits (50 ms doubling to 1 s) and pushes again, for at most max_wait seconds per batch.
  class Backfill
    Report = Struct.new(:identity, :stale, :waiting, :enqueued, :batches, :skipped, :waits, keyword_init: true)
    PROBE_TEXT = "model identity"

    def initialize(client:, rows:, text:, reply_job:, model: nil, dimensions: nil, batch_size: 32,
                   requeue_after: 600, max_wait: 300, relation: nil, logger: nil, timeout: 60)
      raise ArgumentError, "batch_size must be an Integer in 1..1024, got #{batch_size.inspect}" unless
        batch_size.is_a?(Integer) && (1..1024).cover?(batch_size)
      raise ArgumentError, "requeue_after must be a positive number of seconds" unless
        requeue_after.is_a?(Numeric) && requeue_after.positive?

      @client, @rows, @text, @reply_job, @model = client, rows, text, reply_job, model
      @dimensions, @batch_size, @requeue_after, @max_wait = dimensions, batch_size, requeue_after, max_wait
      @relation = relation || rows.model_class.all
      @logger, @timeout = logger, timeout
    end

    # Run to the end of the table; yields the Report after each batch. Returns the final Report.
    def run
      identity = serving_identity
      cutoff = Time.now.utc - @requeue_after
      stale = @rows.stale(identity, @relation)
      report = Report.new(identity: identity, stale: stale.count, waiting: @rows.waiting(stale, cutoff).count,
                          enqueued: 0, batches: 0, skipped: 0, waits: 0)
      log("backfill: #{report.stale} rows need #{identity}; #{report.waiting} of them already have a task out")
      each_batch(@rows.idle(stale, cutoff)) do |rows|
        enqueue(rows, report)
        yield report if block_given?
      end
      log("backfill: done, #{report.enqueued} rows in #{report.batches} tasks, #{report.skipped} blank skipped, " \
          "#{report.waits} waits on a full queue")
      report
    end

    private

    # "alias@revision" of the model serving the queue now, from one short embed; its width must be the column's.
    def serving_identity
      probe = @client.embed([PROBE_TEXT], model: @model, timeout: @timeout)
      if @dimensions && probe["dim"] != @dimensions
        raise Error, "the serving model #{probe['alias']} makes #{probe['dim']}-dimensional vectors; the column " \
                     "holds #{@dimensions}: add a column of the new width (and its index) before switching models"
      end
      InferenceTasks.model_identity(probe)
    end

    # Batches in primary-key order, each read after the last one's id, so rows done meanwhile drop out.
    def each_batch(relation)
      key = @rows.model_class.primary_key
      table = @rows.model_class.arel_table
      last = nil
      loop do
        scope = relation.order(key => :asc).limit(@batch_size)
        scope = scope.where(table[key].gt(last)) unless last.nil?
        rows = scope.pluck(key, @text)
        break if rows.empty?

        last = rows.last.first
        yield rows
      end
    end

    def enqueue(rows, report)
      blank, texts = rows.partition { |_, text| text.nil? || text.to_s.strip.empty? }
      if blank.any?
        report.skipped += blank.size
        log("backfill: skipped rows #{blank.map(&:first).join(', ')}: no text to embed")
      end
      return if texts.empty?

      ids = texts.map(&:first)
      push(texts.map { |_, text| text.to_s }, ids, report)
      report.enqueued += ids.size
      report.batches += 1
    end

    # The mark and the push in one short transaction (VectorRows#request); a full queue rolls the marks back
    # and the batch is tried again after a wait outside it, so no row lock is held while the queue drains.
    def push(texts, ids, report)
      waited = 0.0
      delay = 0.05
      begin
        @rows.request(ids) do |task_id|
          @client.enqueue_embed(texts, model: @model, task_id: task_id,
                                       reply_to: { active_job: { class: @reply_job, context: { "ids" => ids } } })
        end
      rescue QueueFull => e
        raise if waited >= @max_wait

        report.waits += 1
        log("backfill: #{e.message}; pushing again in #{delay} s", :debug)
        sleep(delay)
        waited += delay
        delay = [delay * 2, 1.0].min
        retry
      end
    end

    def log(message, level = :info)
      @logger&.public_send(level, message)
    end
  end
end

# frozen_string_literal: true

module InferenceTasks
  # Keeps a table's vectors in step with its texts through the fleet (VectorRows holds the rules): an edited row
  # is marked in the edit's own transaction and its text pushed once that has committed; each reply is settled:
  # stored, or logged, or, when the worker refused a batch, asked for again one row per task so one bad text
  # costs only its own row. Every log line names the reply's task id and the rows.
  #
  #   sync = InferenceTasks::VectorSync.new(client: INFERENCE, rows: Article.embedding_rows,
  #                                         reply_job: EmbeddingReadyJob, logger: Rails.logger)
  #   before_save  { @pending = sync.mark(self) }        # when the text changes
  #   after_commit { sync.request(self, @pending) }      # then push
  #   EmbeddingReadyJob#perform(outcome): sync.settle(outcome)
  class VectorSync
    # What an edit's before_save marked: the task id and the text to push after the commit, or why the worker
    # would refuse the text (the row's vector is cleared instead).
    Pending = Struct.new(:task_id, :text, :refused, keyword_init: true)
    # The worker's error type for input it refuses (docs/tasks.md); any other failure may pass, and the row
    # keeps its mark until a backfill asks again (requeue_after).
    REFUSED = "InvalidInput"

    attr_reader :client, :rows, :model, :logger

    # client: an InferenceTasks::Client; rows: the table's VectorRows; reply_job: the ActiveJob class that calls
    # #settle; model: the catalogue alias (nil: the fleet's default model).
    def initialize(client:, rows:, reply_job:, model: nil, logger: nil)
      @client = client
      @rows = rows
      @reply_job = reply_job
      @model = model
      @logger = logger
    end

    # In a before_save when the text changes: the row is marked in the edit's own transaction, so the edit and
    # its request commit or roll back together. Returns the Pending to pass to #request after the commit.
    def mark(record)
      text = record[@rows.text]
      reason = Screen.refusal(text)
      if reason
        @rows.clear_record(record)
        return Pending.new(refused: reason)
      end
      Pending.new(task_id: @rows.mark_record(record), text: text.to_s)
    end

    # In an after_commit: push what #mark marked. A push that fails is logged, not raised (the edit has
    # committed), and its mark expired, so the next backfill asks for the row at once. Returns the task id, or
    # nil when nothing was pushed.
    def request(record, pending)
      return nil if pending.nil?

      id = record.public_send(@rows.primary_key)
      if pending.refused
        log(:warn, "#{table}: not embedding #{id}: #{pending.refused}; its vector is cleared")
        return nil
      end
      push_or_expire(VectorRows::Claim.new(task_id: pending.task_id, ids: [id], texts: [pending.text], refused: []))
    end

    # Push a claim's texts as one embed task, its reply to the reply job with the rows' ids as context. Call it
    # only once the claim's transaction has committed (VectorRows#claim returns then). Raises what the client
    # raises (QueueFull, RedisFull, a Redis error).
    def push(claim)
      @client.enqueue_embed(claim.texts, model: @model, task_id: claim.task_id,
                                         reply_to: { active_job: { class: @reply_job, context: { "ids" => claim.ids } } })
    end

    # The reply job's body: store a success's vectors; when the worker refused a task of several rows, ask for
    # those rows again one per task; when it refused one row's text, clear that row's vector; log any other
    # failure (the rows keep their mark until requeue_after). Returns { stored:, superseded:, cleared:, split: }.
    def settle(outcome)
      task_id = outcome.fetch("task_id")
      ids = outcome.fetch("context").fetch("ids")
      done = { stored: [], superseded: [], cleared: [], split: [] }
      if outcome["state"] == "SUCCESS"
        done = done.merge(@rows.store(outcome))
        log_stored(task_id, InferenceTasks.model_identity(outcome["result"]), done)
        return done
      end

      type = outcome.dig("error", "type")
      message = outcome.dig("error", "message")
      if type == REFUSED && ids.size > 1
        done.merge(split: split(task_id, ids, message))
      elsif type == REFUSED
        cleared = @rows.clear_refused(task_id, ids)
        log(:warn, "#{table}: task #{task_id} refused #{ids.join(',')}: #{message}; cleared: " \
                   "#{cleared.empty? ? 'none (a newer request owns them)' : cleared.join(',')}")
        done.merge(cleared: cleared)
      else
        log(:warn, "#{table}: task #{task_id} for #{ids.join(',')} failed (#{type}: #{message}); the rows keep " \
                   "their vector and mark, and a backfill asks again after requeue_after")
        done
      end
    end

    private

    # A refused batch, one task per row still marked with it: rows the gem can screen are cleared by the claim,
    # and the worker's refusal of a single text clears only that row (#settle).
    def split(task_id, ids, message)
      log(:warn, "#{table}: task #{task_id} refused (#{message}); asking for #{ids.join(',')} again, one task each")
      ids.filter_map do |id|
        claim = @rows.claim(@rows.marked(task_id, [id]))
        claim.refused.each { |row, reason| log(:warn, "#{table}: not embedding #{row}: #{reason}; its vector is cleared") }
        next if claim.ids.empty?

        push_or_expire(claim)&.tap do |pushed|
          log(:info, "#{table}: task #{pushed} asks for #{id} alone (split from #{task_id})")
        end
      end
    end

    # Push the claim; a push that fails is logged, not raised, and its mark expired, so the next backfill asks
    # for its rows at once. Returns the task id, or nil when nothing was pushed.
    def push_or_expire(claim)
      push(claim)
      claim.task_id
    rescue Error, Redis::BaseError => e
      @rows.expire(claim.task_id)
      log(:warn, "#{table}: task #{claim.task_id} for #{claim.ids.join(',')} was not pushed (#{e.class}: " \
                 "#{e.message}); its mark is expired, the next backfill asks again")
      nil
    end

    def log_stored(task_id, identity, done)
      log(:info, "#{table}: task #{task_id} stored #{done[:stored].join(',')} with #{identity}") unless done[:stored].empty?
      return if done[:superseded].empty?

      log(:info, "#{table}: task #{task_id} superseded #{done[:superseded].join(',')}: a newer request owns them")
    end

    def table
      @rows.model_class.table_name
    end

    def log(level, message)
      @logger&.public_send(level, message)
    end
  end
end

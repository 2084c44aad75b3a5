# frozen_string_literal: true

require "securerandom"

module InferenceTasks
  # The embedding columns of an ActiveRecord model's table, and the rules that keep them right when replies
  # arrive late, twice, at once or out of order. Each row holds its vector, the identity of the model that made
  # it ("alias@revision", InferenceTasks.model_identity) and the mark of the one embed task it waits for (the
  # task's id and when it was asked). The contract (deploy/rails/README.md, "Search with pgvector"): delivery is
  # at least once, the effect on a row is exactly once, and the latest request wins.
  #
  # - A mark is committed before its task is pushed: an edit marks the row in its own transaction (#mark_record),
  #   a backfill in a short transaction that locks the rows and reads their texts (#claim). A task id is pushed
  #   only with the texts its rows had when the mark committed, and only after that commit, so a reply can never
  #   read a row before its mark, however fast it comes back.
  # - #store writes only the rows still marked with the reply's task: a newer mark (the text was edited, a
  #   backfill asked again) supersedes it, and of two copies of one reply only the first finds its mark.
  # - A mark with no live task (a push that failed, a process killed between commit and push, a task lost or
  #   failed) is asked for again once it is older than requeue_after (#due), whether or not the row holds a vector;
  #   a push known to have failed expires its mark at once (#expire).
  # - stale: a row with no vector, or one whose identity is not the serving model's.
  #
  # Uses only ActiveRecord's public query API (where, lock, update_all, pluck, Arel predicates).
  class VectorRows
    COLUMNS = { vector: :embedding, identity: :embedding_model, task: :embedding_task_id,
                requested_at: :embedding_requested_at }.freeze
    # The requested_at of an expired mark: older than any cutoff, so the next backfill asks for its rows at once.
    EXPIRED = Time.utc(1970, 1, 1)

    # What a transaction marked: the task id, the rows and their texts to push under it (in that order), and the
    # rows whose text the worker would refuse ([[id, reason]]), whose vector it cleared instead.
    Claim = Struct.new(:task_id, :ids, :texts, :refused, keyword_init: true)

    attr_reader :model_class, :text

    # model_class: the ActiveRecord class (Article); text: the column holding the text to embed (:title);
    # columns: COLUMNS' keys mapped to your column names.
    def initialize(model_class, text:, columns: {})
      unknown = columns.keys - COLUMNS.keys
      raise ArgumentError, "columns: unknown keys #{unknown.inspect} (allowed: #{COLUMNS.keys.inspect})" if unknown.any?
      raise ArgumentError, "text: the column holding the text to embed, got #{text.inspect}" unless
        text.is_a?(Symbol) || text.is_a?(String)

      @model_class = model_class
      @text = text
      @columns = COLUMNS.merge(columns)
    end

    # Rows that need a vector from the model `identity`: none yet, or another model's.
    def stale(identity, relation = @model_class.all)
      relation.where(stale_condition(identity))
    end

    # Rows of `relation` asked for after `cutoff` whose reply has not come yet.
    def waiting(relation, cutoff)
      relation.where(arel(:task).not_eq(nil).and(arel(:requested_at).gteq(cutoff)))
    end

    # Rows of `relation` a backfill asks for: stale with no mark, or marked before `cutoff` whatever they hold
    # (that task failed, was lost or was never pushed: an edited row keeps its old text's vector until asked again).
    def due(identity, cutoff, relation = @model_class.all)
      unmarked_stale = stale_condition(identity).and(arel(:task).eq(nil))
      expired = arel(:task).not_eq(nil).and(arel(:requested_at).lt(cutoff))
      relation.where(unmarked_stale.or(expired))
    end

    # Mark `record` with a new task id (a before_save: the mark commits or rolls back with the edit). Returns it.
    def mark_record(record)
      SecureRandom.uuid.tap do |task_id|
        record[col(:task)] = task_id
        record[col(:requested_at)] = Time.now.utc
      end
    end

    # No vector, identity or mark (a before_save whose new text the worker would refuse): the old text's vector
    # is not the current text's.
    def clear_record(record)
      cleared_values.each { |column, value| record[column] = value }
    end

    # Lock the rows `scope` selects (in primary-key order), read their texts, and in the same transaction mark
    # those the worker would accept with one new task id and clear those it would refuse. Returns the Claim once
    # that transaction has committed: only then may its task be pushed. Call it outside any transaction of your
    # own (else the marks commit with yours, after the push). The lock makes a concurrent edit wait or be waited
    # for, and PostgreSQL re-checks `scope`'s conditions on a row an edit just re-marked, which drops it.
    def claim(scope, max_chars: nil)
      task_id = SecureRandom.uuid
      key = primary_key
      @model_class.transaction do
        accepted = []
        refused = []
        scope.order(key => :asc).lock.pluck(key, @text).each do |id, text|
          reason = Screen.refusal(text, max_chars: max_chars)
          reason ? refused << [id, reason] : accepted << [id, text.to_s]
        end
        unless accepted.empty?
          @model_class.where(key => accepted.map(&:first))
                      .update_all(col(:task) => task_id, col(:requested_at) => Time.now.utc)
        end
        @model_class.where(key => refused.map(&:first)).update_all(cleared_values) unless refused.empty?
        Claim.new(task_id: task_id, ids: accepted.map(&:first), texts: accepted.map(&:last), refused: refused)
      end
    end

    # The rows of `ids` still marked with `task_id` (a refused task's, to be asked for again one by one).
    def marked(task_id, ids)
      @model_class.where(primary_key => ids, col(:task) => task_id)
    end

    # A push of `task_id` failed: its rows' mark is expired, so the next backfill asks for them at once.
    def expire(task_id)
      @model_class.where(col(:task) => task_id).update_all(col(:requested_at) => EXPIRED)
    end

    # The worker refused `task_id`'s one text: its rows still marked with it lose their vector (it was the old
    # text's) and the mark. Returns the ids cleared.
    def clear_refused(task_id, ids)
      @model_class.transaction do
        marked(task_id, ids).order(primary_key => :asc).lock.pluck(primary_key).tap do |cleared|
          marked(task_id, cleared).update_all(cleared_values) unless cleared.empty?
        end
      end
    end

    # Write a finished embed's vectors into the rows still marked with its task (reply context "ids", in the
    # order of the texts), in one transaction, rows in primary-key order as #claim locks them. Returns
    # { stored: [ids], superseded: [ids] }. Each row is one conditional UPDATE: a row another transaction is
    # changing makes it wait, and PostgreSQL then re-checks the mark on the row's newest version, so two copies
    # of one reply cannot both store and a reply never overwrites a newer mark.
    def store(outcome)
      ids = outcome.fetch("context").fetch("ids")
      return { stored: [], superseded: ids } unless outcome["state"] == "SUCCESS"

      result = outcome.fetch("result")
      vectors = result.fetch("embeddings")
      raise Error, "task #{outcome['task_id']}: #{vectors.size} vectors for #{ids.size} rows" unless vectors.size == ids.size

      identity = InferenceTasks.model_identity(result)
      stored = @model_class.transaction do
        ids.zip(vectors).sort_by(&:first).select do |id, vector|
          marked(outcome.fetch("task_id"), id).update_all(stored_values(vector, identity)) == 1
        end.map(&:first)
      end
      { stored: ids & stored, superseded: ids - stored }
    end

    def col(name)
      @columns.fetch(name)
    end

    def primary_key
      @model_class.primary_key
    end

    private

    def arel(name)
      @model_class.arel_table[col(name)]
    end

    def stale_condition(identity)
      arel(:vector).eq(nil).or(arel(:identity).eq(nil)).or(arel(:identity).not_eq(identity))
    end

    def stored_values(vector, identity)
      values = { col(:vector) => Pgvector.literal(vector), col(:identity) => identity, col(:task) => nil,
                 col(:requested_at) => nil }
      values[:updated_at] = Time.now.utc if @model_class.column_names.include?("updated_at")
      values
    end

    def cleared_values
      { col(:vector) => nil, col(:identity) => nil, col(:task) => nil, col(:requested_at) => nil }
    end
  end
end

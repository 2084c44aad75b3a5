# frozen_string_literal: true

require "securerandom"

module InferenceTasks
  # The embedding columns of an ActiveRecord model's table, and the rules that keep them right when replies
  # arrive late, twice or out of order. Each row holds its vector, the identity of the model that made it
  # ("alias@revision", InferenceTasks.model_identity) and the id of the one embed task it waits for:
  #
  # - request: the row is marked with a new task id in the same transaction that pushes the task, so a
  #   push that failed (or a process killed before its commit) leaves no mark, and a mark means a push;
  # - store: a reply writes only the rows still marked with its task id: a newer request (the text was
  #   edited, a backfill asked again) supersedes it, and a reply read twice writes once;
  # - a failed task writes nothing: its rows keep their old vector (or none) and their mark, which a
  #   backfill honours until requeue_after has passed;
  # - stale: a row with no vector, or one whose identity is not the serving model's.
  #
  # Uses only ActiveRecord's public query API (where, update_all, pluck, Arel predicates).
  class VectorRows
    COLUMNS = { vector: :embedding, identity: :embedding_model, task: :embedding_task_id,
                requested_at: :embedding_requested_at }.freeze

    attr_reader :model_class

    # model_class: the ActiveRecord class (Article); columns: COLUMNS' keys mapped to your column names.
    def initialize(model_class, columns: {})
      unknown = columns.keys - COLUMNS.keys
      raise ArgumentError, "columns: unknown keys #{unknown.inspect} (allowed: #{COLUMNS.keys.inspect})" if unknown.any?

      @model_class = model_class
      @columns = COLUMNS.merge(columns)
    end

    # Rows that need a vector from the model `identity`: none yet, or another model's.
    def stale(identity, relation = @model_class.all)
      table = @model_class.arel_table
      relation.where(table[col(:vector)].eq(nil).or(table[col(:identity)].eq(nil))
                     .or(table[col(:identity)].not_eq(identity)))
    end

    # Of `relation`, the rows no task is embedding now: never asked, or asked before `cutoff` (a task
    # pushed then that has not written them by now failed or was lost).
    def idle(relation, cutoff)
      table = @model_class.arel_table
      relation.where(table[col(:task)].eq(nil).or(table[col(:requested_at)].lt(cutoff)))
    end

    # Rows of `relation` asked for after `cutoff` whose reply has not come yet.
    def waiting(relation, cutoff)
      table = @model_class.arel_table
      relation.where(table[col(:task)].not_eq(nil).and(table[col(:requested_at)].gteq(cutoff)))
    end

    # Mark rows `ids` with a new task id and yield it, in one transaction: the block pushes the task.
    # Returns the block's value. An exception in the block rolls the marks back.
    def request(ids)
      task_id = SecureRandom.uuid
      @model_class.transaction do
        @model_class.where(@model_class.primary_key => ids)
                    .update_all(col(:task) => task_id, col(:requested_at) => Time.now.utc)
        yield task_id
      end
    end

    # Write a finished embed's vectors into the rows still waiting for it (reply context "ids", in the
    # order of the texts). Returns { stored: [ids], superseded: [ids] }; a failed task stores nothing.
    def store(outcome)
      ids = outcome.fetch("context").fetch("ids")
      return { stored: [], superseded: [] } unless outcome["state"] == "SUCCESS"

      result = outcome.fetch("result")
      identity = InferenceTasks.model_identity(result)
      stored = ids.zip(result.fetch("embeddings")).select do |id, vector|
        values = { col(:vector) => Pgvector.literal(vector), col(:identity) => identity, col(:task) => nil,
                   col(:requested_at) => nil }
        values[:updated_at] = Time.now.utc if @model_class.column_names.include?("updated_at")
        @model_class.where(@model_class.primary_key => id, col(:task) => outcome.fetch("task_id")).update_all(values) == 1
      end.map(&:first)
      { stored: stored, superseded: ids - stored }
    end

    def col(name)
      @columns.fetch(name)
    end
  end
end

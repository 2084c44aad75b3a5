# frozen_string_literal: true

# app/jobs/embedding_ready_job.rb
# Runs (through Sidekiq, ActiveJob's queue adapter) when a worker finishes an embed task enqueued with
# reply_to: { active_job: { class: EmbeddingReadyJob, context: { "ids" => [...] } } }, after success or failure:
# one article (Article#request_embedding) or a backfill's batch (Article.backfill_embeddings).
class EmbeddingReadyJob < ApplicationJob
  queue_as :default

  # outcome: {"task_id", "task", "state", "result", "error", "context"} (docs/wire-protocol.md). Stores the
  # vectors into the rows still waiting for this task, or clears a refused text's row, or asks again one row
  # per task for a refused batch; each step is logged with the task id and the rows (InferenceTasks::VectorSync).
  def perform(outcome)
    Article.embeddings.settle(outcome)
  end
end

# frozen_string_literal: true

# app/jobs/embedding_ready_job.rb
# Runs (through Sidekiq, ActiveJob's queue adapter) when a worker finishes an embed task enqueued with
# reply_to: { active_job: { class: EmbeddingReadyJob, context: { "ids" => [...] } } }, after success or failure:
# one article (Article#request_embedding) or a backfill's batch (Article.backfill_embeddings).
class EmbeddingReadyJob < ApplicationJob
  queue_as :default

  # outcome: {"task_id", "task", "state", "result", "error", "context"} (docs/wire-protocol.md)
  def perform(outcome)
    ids = outcome.fetch("context").fetch("ids")
    unless outcome["state"] == "SUCCESS"
      # The rows keep what they had; a later backfill asks again once the request is old (requeue_after).
      Rails.logger.warn("embedding failed for articles #{ids.join(',')}: #{outcome.dig('error', 'message')}")
      return
    end
    done = Article.embedding_rows.store(outcome)
    identity = InferenceTasks.model_identity(outcome["result"])
    Rails.logger.info("embedded articles #{done[:stored].join(',')} with #{identity}") if done[:stored].any?
    return if done[:superseded].empty?

    Rails.logger.info("not stored: articles #{done[:superseded].join(',')} wait for a newer request")
  end
end

# frozen_string_literal: true

# app/jobs/embedding_ready_job.rb
# Runs (through Sidekiq, ActiveJob's queue adapter) when a worker finishes an embed task enqueued
# with reply_to: { active_job: { class: EmbeddingReadyJob, ... } }, after success or failure.
class EmbeddingReadyJob < ApplicationJob
  queue_as :default

  # outcome: {"task_id", "task", "state", "result", "error", "context"} (docs/wire-protocol.md)
  def perform(outcome)
    article = Article.find(outcome.fetch("context").fetch("article_id"))
    if outcome["state"] == "SUCCESS"
      article.update!(embedding: outcome["result"]["embeddings"].first)
    else
      Rails.logger.warn("embedding failed for article #{article.id}: #{outcome['error']['message']}")
    end
  end
end

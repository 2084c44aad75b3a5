# frozen_string_literal: true

# app/models/article.rb: embed each saved title, without blocking the request or an HTTP call.
class Article < ApplicationRecord
  after_commit :request_embedding, on: %i[create update], if: :saved_change_to_title?

  private

  # The vector comes back as EmbeddingReadyJob (an ActiveJob run by Sidekiq) once a worker is done.
  def request_embedding
    INFERENCE.enqueue_embed(
      [title],
      reply_to: { active_job: { class: EmbeddingReadyJob, context: { "article_id" => id } } }
    )
  end
end

# frozen_string_literal: true

# app/models/article.rb: embed each saved title, without blocking the request or an HTTP call.
class Article < ApplicationRecord
  after_commit :request_embedding, on: %i[create update], if: :saved_change_to_title?

  private

  def request_embedding
    INFERENCE.enqueue_embed(
      [title],
      reply_to: { sidekiq: { class: "EmbeddingReadyJob", queue: "default", context: { "article_id" => id } } }
    )
  end
end

# frozen_string_literal: true

# app/models/article.rb: embed each saved title without blocking the request or an HTTP call, and search
# the titles by meaning in PostgreSQL with pgvector (db/migrate/..._add_embedding_to_articles.rb).
class Article < ApplicationRecord
  # The catalogue alias of the model the vectors come from (nil: the fleet's default model, all-MiniLM-L6-v2),
  # and the width of its vectors: the embedding column's.
  EMBEDDING_MODEL = ENV["INFERENCE_EMBEDDING_MODEL"]
  EMBEDDING_DIMENSIONS = Integer(ENV.fetch("INFERENCE_EMBEDDING_DIMENSIONS", "384"))

  attribute :embedding, VectorType.new

  after_commit :request_embedding, on: %i[create update], if: :saved_change_to_title?

  # The embedding columns and their rules (the gem's InferenceTasks::VectorRows): a reply writes only the rows
  # still waiting for it; rows with no vector or another model's are stale.
  def self.embedding_rows
    @embedding_rows ||= InferenceTasks::VectorRows.new(self)
  end

  # The `limit` articles nearest to `query` by cosine distance, nearest first, each with its `distance`.
  # One blocking embed of the query (a few ms on the worker; the gem wakes on the result), then one SQL
  # query on the HNSW index. Only rows the query's model embedded are compared: a stale row's vector comes
  # from another model's space, where distances to this query mean nothing.
  def self.semantic_search(query, limit: 10, timeout: 5)
    result = INFERENCE.embed([query], model: EMBEDDING_MODEL, timeout: timeout)
    vector = InferenceTasks::Pgvector.literal(result.fetch("embeddings").first)
    distance = sanitize_sql_array(["embedding <=> ?::vector", vector])
    where(embedding_model: InferenceTasks.model_identity(result))
      .select(Arel.sql("articles.*, #{distance} AS distance"))
      .order(Arel.sql(distance))
      .limit(limit)
  end

  # Every article that has no vector, or one a model other than the serving one made (a rake task:
  # lib/tasks/embeddings.rake). Safe to stop and run again.
  def self.backfill_embeddings(batch_size: 32, logger: Rails.logger, client: INFERENCE, &progress)
    InferenceTasks::Backfill.new(client: client, rows: embedding_rows, text: :title, reply_job: EmbeddingReadyJob,
                                 model: EMBEDDING_MODEL, dimensions: EMBEDDING_DIMENSIONS, batch_size: batch_size,
                                 logger: logger).run(&progress)
  end

  private

  # The vector comes back as EmbeddingReadyJob (an ActiveJob run by Sidekiq) once a worker is done. The row is
  # marked with the task's id in the transaction that pushes it: a later edit's reply supersedes this one.
  def request_embedding
    self.class.embedding_rows.request([id]) do |task_id|
      INFERENCE.enqueue_embed([title], model: EMBEDDING_MODEL, task_id: task_id,
                                       reply_to: { active_job: { class: EmbeddingReadyJob, context: { "ids" => [id] } } })
    end
  end
end

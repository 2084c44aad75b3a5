# frozen_string_literal: true

# app/models/article.rb: embed each saved title without blocking the request or an HTTP call, and search
# the titles by meaning in PostgreSQL with pgvector (db/migrate/..._add_embedding_to_articles.rb).
class Article < ApplicationRecord
  # The catalogue alias of the model the vectors come from (nil: the fleet's default model, all-MiniLM-L6-v2),
  # and the width of its vectors: the embedding column's.
  EMBEDDING_MODEL = ENV["INFERENCE_EMBEDDING_MODEL"]
  EMBEDDING_DIMENSIONS = Integer(ENV.fetch("INFERENCE_EMBEDDING_DIMENSIONS", "384"))

  attribute :embedding, VectorType.new

  # A new title is marked for embedding in the save's own transaction, and pushed once that has committed: the
  # edit and its request stand or fall together, and a reply, however fast, finds its mark (the gem's
  # InferenceTasks::VectorRows says why). Texts changed around callbacks (update_all, SQL) are not marked.
  before_save :mark_embedding, if: :will_save_change_to_title?
  after_commit :request_embedding, if: :embedding_pending
  after_rollback { @embedding_pending = nil }

  # The embedding columns and their rules: a reply writes only the rows still waiting for it; rows with no
  # vector or another model's are stale.
  def self.embedding_rows
    @embedding_rows ||= InferenceTasks::VectorRows.new(self, text: :title)
  end

  # Marks, pushes and settles replies (EmbeddingReadyJob) for the rows above.
  def self.embeddings(client: INFERENCE, logger: Rails.logger)
    InferenceTasks::VectorSync.new(client: client, rows: embedding_rows, reply_job: EmbeddingReadyJob,
                                   model: EMBEDDING_MODEL, logger: logger)
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

  # Every article with no vector, one a model other than the serving one made, or a request older than
  # requeue_after (a rake task: lib/tasks/embeddings.rake; run it on a schedule too). Safe to stop and run again.
  def self.backfill_embeddings(batch_size: 32, logger: Rails.logger, client: INFERENCE, &progress)
    InferenceTasks::Backfill.new(sync: embeddings(client: client, logger: logger), dimensions: EMBEDDING_DIMENSIONS,
                                 batch_size: batch_size).run(&progress)
  end

  private

  attr_reader :embedding_pending

  def mark_embedding
    @embedding_pending = self.class.embeddings.mark(self)
  end

  # The vector comes back as EmbeddingReadyJob (an ActiveJob run by Sidekiq) once a worker is done.
  def request_embedding
    pending = @embedding_pending
    @embedding_pending = nil
    self.class.embeddings.request(self, pending)
  end
end

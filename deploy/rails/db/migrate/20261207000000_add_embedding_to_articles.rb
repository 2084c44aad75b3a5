# frozen_string_literal: true

# db/migrate/20261207000000_add_embedding_to_articles.rb: a pgvector column for each article's embedding,
# which model made it, the embed task it waits for, and an HNSW index for cosine distance (`<=>`).
# The column's width is the model's (Article::EMBEDDING_DIMENSIONS: 384 for all-MiniLM-L6-v2); a model of
# another width needs a new column and index (a vector column holds one width).
class AddEmbeddingToArticles < ActiveRecord::Migration[6.1]
  def change
    enable_extension "vector"
    add_column :articles, :embedding, "vector(#{Article::EMBEDDING_DIMENSIONS})"
    add_column :articles, :embedding_model, :string           # "alias@revision" of the model that made it
    add_column :articles, :embedding_task_id, :string         # the embed task the row waits for, if any
    add_column :articles, :embedding_requested_at, :datetime  # when that task was pushed
    # HNSW (pgvector >= 0.5): no training step, good recall while rows are added; cosine, as the model's
    # vectors are compared. m and ef_construction are pgvector's defaults, written out to be tuned.
    add_index :articles, :embedding, using: :hnsw, opclass: :vector_cosine_ops,
                                     name: "index_articles_on_embedding_cosine"
  end
end

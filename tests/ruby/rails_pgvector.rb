# frozen_string_literal: true

# Driven by tests/external/test_rails_pgvector.py, inside the Rails app (tests/rails_app, rooted at deploy/rails)
# on a real PostgreSQL with pgvector (DATABASE_URL). One command per run, its input as JSON in the second
# argument, its answer as one JSON line on stdout (progress lines before it):
#   setup     the team's articles table as it was, then deploy/rails's migration
#   create    Article.create! for each title (after_commit enqueues each embed with an ActiveJob reply)
#   search    Article.semantic_search for each query, on the HNSW index and exactly: ids and distances, nearest first
#   backfill  Article.backfill_embeddings, printing its progress after each batch; with "pause": true it
#             prints {"probed": true} once it knows the serving model and reads a line from stdin before going on
#             (the test freezes the worker meanwhile, so the queue fills)
require "delegate"
require "json"
require_relative "../rails_app/config/environment"

def setup
  ActiveRecord::Schema.verbose = false
  ActiveRecord::Schema.define do
    create_table :articles, force: true do |t|
      t.string :title
      t.timestamps
    end
  end
  require File.join(Rails.root, "db/migrate/20261207000000_add_embedding_to_articles")
  ActiveRecord::Migration.suppress_messages { AddEmbeddingToArticles.new.migrate(:up) }
  Article.reset_column_information
  { "columns" => Article.columns.to_h { |column| [column.name, column.sql_type] } }
end

def create(titles)
  titles.map { |title| Article.create!(title: title) }.then do |articles|
    { "ids" => articles.map(&:id), "created_at" => articles.map { |article| article.created_at.to_f } }
  end
end

# Each query twice: on the HNSW index (sequential scans off: 200 rows would otherwise be scanned) and by an exact
# scan (index scans off), with the plan of the first.
def search(queries, limit)
  ranked = lambda do |setting, query|
    Article.transaction do
      Article.connection.execute("SET LOCAL #{setting} = off")
      Article.semantic_search(query, limit: limit).map { |article| [article.id, article.distance.to_f] }
    end
  end
  plan = Article.transaction do
    Article.connection.execute("SET LOCAL enable_seqscan = off")
    Article.semantic_search(queries.first, limit: limit).explain
  end
  { "index" => queries.map { |query| ranked.call("enable_seqscan", query) },
    "exact" => queries.map { |query| ranked.call("enable_indexscan", query) }, "plan" => plan }
end

# The client, paused after its first call (the backfill's probe of the serving model) until stdin says go.
class PausedAfterProbe < SimpleDelegator
  def embed(*args, **options)
    super.tap do
      puts JSON.generate({ "probed" => true })
      $stdout.flush
      $stdin.gets
    end
  end
end

def backfill(batch_size, pause)
  client = pause ? PausedAfterProbe.new(INFERENCE) : INFERENCE
  report = Article.backfill_embeddings(batch_size: batch_size, logger: Logger.new($stdout), client: client) do |progress|
    puts JSON.generate({ "progress" => progress.to_h })
    $stdout.flush
  end
  report.to_h
end

$stdout.sync = true
input = JSON.parse(ARGV.fetch(1, "{}"))
answer = case ARGV.fetch(0)
         when "setup" then setup
         when "create" then create(input.fetch("titles"))
         when "search" then search(input.fetch("queries"), input.fetch("limit", 5))
         when "backfill" then backfill(input.fetch("batch_size", 32), input.fetch("pause", false))
         else raise ArgumentError, "unknown command #{ARGV[0].inspect}"
         end
puts JSON.generate(answer)

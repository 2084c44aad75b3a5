# frozen_string_literal: true

# Driven by tests/external/test_rails_pgvector.py, inside the Rails app (tests/rails_app, rooted at deploy/rails)
# on a real PostgreSQL with pgvector (DATABASE_URL). One command per run, its input as JSON in the second
# argument, its answer as one JSON line on stdout (progress lines before it):
#   setup     the team's articles table as it was, then deploy/rails's migration
#   create    Article.create! for each title (after_commit enqueues each embed with an ActiveJob reply)
#   search    Article.semantic_search for each query, on the HNSW index and exactly: ids and distances, nearest first
#   backfill  Article.backfill_embeddings, printing its progress after each batch; with "pause": true it
#             prints {"probed": true} once it knows the serving model and reads a line from stdin before going on
#             (the test freezes the worker meanwhile, so the queue fills); with "edit": {"id", "title"} its first push
#             of a batch holding that row edits the row (on another connection, pushed through the real queue) and
#             then meets a full queue
#   fill      embeds pushed onto the default queue until the client's max_queue_depth refuses one
#   edit      new titles saved on existing articles; each row's mark after the save
#   instant   a new article and an edited one, each reply settled on another connection before its push returns
#   late      a reply for an article's first title, arriving while an edit's transaction holds the row
#   twice     one reply settled twice, then two copies of another at once (one waiting on the other's lock)
#   push      the given rows claimed and pushed as one task, unscreened for length (a batch the worker refuses)
#   verify    for each id: stores counted by the database, and the cosine of the stored vector to the current
#             title's embedding by the worker
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

# Which client the model's callbacks and reply settling use: a stand-in below, or (nil) the real INFERENCE.
module StandIn
  class << self
    attr_accessor :client
  end
end

Article.singleton_class.prepend(Module.new do
  def embeddings(client: StandIn.client || INFERENCE, logger: Rails.logger)
    super(client: client, logger: logger)
  end
end)

# The outcome a reply job would get for `task_id`: the worker's real embedding of `texts`.
def outcome_for(task_id, texts, ids)
  result = INFERENCE.embed(texts, model: Article::EMBEDDING_MODEL, timeout: 60)
  { "task_id" => task_id, "task" => "inference.embed", "state" => "SUCCESS", "result" => result, "error" => nil,
    "context" => { "ids" => ids } }
end

# Stands in for the queue: each push is answered at once, its reply settled on another connection (a thread of
# its own) before the push returns, the fastest a reply can come. Records whether the pushing connection still
# had a transaction open (then the reply could not have seen an uncommitted mark's row).
class InstantReplies
  attr_reader :pushes

  def initialize
    @pushes = []
  end

  def enqueue_embed(texts, task_id:, reply_to:, **)
    ids = reply_to.fetch(:active_job).fetch(:context).fetch("ids")
    open = Article.connection.transaction_open?
    outcome = outcome_for(task_id, texts, ids)
    settled = Thread.new { Article.connection_pool.with_connection { Article.embeddings.settle(outcome) } }.value
    @pushes << { "task_id" => task_id, "ids" => ids, "transaction_open" => open, "stored" => settled[:stored] }
    task_id
  end
end

# Stands in for a queue whose replies come later: records each push, sends nothing.
class HeldPushes
  attr_reader :pushes

  def initialize
    @pushes = []
  end

  def enqueue_embed(texts, task_id:, reply_to:, **)
    @pushes << { task_id: task_id, texts: texts, ids: reply_to.fetch(:active_job).fetch(:context).fetch("ids") }
    task_id
  end

  def outcome(push)
    outcome_for(push[:task_id], push[:texts], push[:ids])
  end
end

# The client, paused after its first call (the backfill's probe of the serving model) until stdin says go.
class PausedAfterProbe < SimpleDelegator
  def worker_info(*args, **options)
    super.tap do
      puts JSON.generate({ "probed" => true })
      $stdout.flush
      $stdin.gets
    end
  end
end

# The backfill's client: its first push of the batch holding row `id` edits that row on another connection (the
# edit's own request goes through the real queue), then meets a full queue, so the backfill waits and claims again.
class EditThenFull < SimpleDelegator
  def initialize(client, id, title)
    super(client)
    @id = id
    @title = title
  end

  def enqueue_embed(texts, reply_to:, **options)
    if @id && reply_to.fetch(:active_job).fetch(:context).fetch("ids").include?(@id)
      id = @id
      @id = nil
      Thread.new { Article.connection_pool.with_connection { Article.find(id).update!(title: @title) } }.join
      raise InferenceTasks::QueueFull.new("inference", 2, 2)
    end
    super
  end
end

def backfill(batch_size, pause, edit)
  client = pause ? PausedAfterProbe.new(INFERENCE) : INFERENCE
  client = EditThenFull.new(client, edit.fetch("id"), edit.fetch("title")) if edit
  report = Article.backfill_embeddings(batch_size: batch_size, logger: Logger.new($stdout), client: client) do |progress|
    puts JSON.generate({ "progress" => progress.to_h })
    $stdout.flush
  end
  report.to_h
end

def fill
  pushed = 0
  loop do
    INFERENCE.enqueue_embed(["filler #{pushed}"])
    pushed += 1
    raise "the queue never filled" if pushed > 50
  end
rescue InferenceTasks::QueueFull
  { "pushed" => pushed }
end

# Each article's new title saved (after_commit pushes it through the real queue); returns each row's mark.
def edit(titles)
  { "marks" => titles.to_h { |id, title| [id, Article.find(id).tap { |a| a.update!(title: title) }.embedding_task_id] } }
end

def instant(title, edit_id, edit_title)
  StandIn.client = InstantReplies.new
  created = Article.create!(title: title)
  Article.find(edit_id).update!(title: edit_title)
  { "created" => created.id, "pushes" => StandIn.client.pushes }
end

# Waits (polling PostgreSQL, 30 s at most) until some session of this database waits on a row lock.
def wait_for_a_lock_wait
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
  query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
  until Article.connection.select_value(query).to_i.positive?
    raise "no session waited on a lock within 30 s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep 0.01
  end
end

# Runs the block on its own connection in a transaction that stays open until `release` is called; returns
# [thread, release] once the block has run.
def open_transaction(&block)
  ran = Queue.new
  go = Queue.new
  thread = Thread.new do
    Article.connection_pool.with_connection do
      Article.transaction do
        value = block.call
        ran << true
        go.pop
        value
      end
    end
  end
  ran.pop
  [thread, -> { go << true }]
end

def late(old, new)
  held = HeldPushes.new
  StandIn.client = held
  article = Article.create!(title: old)
  late_reply = held.outcome(held.pushes.last)
  StandIn.client = InstantReplies.new
  editor, commit = open_transaction { Article.find(article.id).update!(title: new) }
  settling = Thread.new { Article.connection_pool.with_connection { Article.embeddings.settle(late_reply) } }
  wait_for_a_lock_wait # the late reply waits for the edit's transaction
  commit.call
  editor.join
  { "id" => article.id, "late" => settling.value.transform_keys(&:to_s), "pushes" => StandIn.client.pushes }
end

def twice(titles)
  held = HeldPushes.new
  StandIn.client = held
  first, second = titles.map { |title| Article.create!(title: title) }
  once, again = held.pushes.map { |push| held.outcome(push) }
  settle = -> { Article.embeddings.settle(once).transform_keys(&:to_s) }
  sequential = [settle.call, settle.call]
  holder, commit = open_transaction { Article.embeddings.settle(again).transform_keys(&:to_s) }
  waiter = Thread.new { Article.connection_pool.with_connection { Article.embeddings.settle(again).transform_keys(&:to_s) } }
  wait_for_a_lock_wait # the second copy waits on the first's row lock
  commit.call
  { "ids" => [first.id, second.id], "sequential" => sequential, "concurrent" => [holder.value, waiter.value] }
end

def push(ids)
  claim = Article.embedding_rows.claim(Article.where(id: ids))
  Article.embeddings.push(claim)
  claim.to_h.transform_keys(&:to_s)
end

def verify(ids)
  rows = Article.where(id: ids).order(:id).pluck(:id, :title, :embedding, :embedding_task_id)
  listed = ids.map { |id| Integer(id) }.join(",")
  stores = Article.connection.select_rows(
    "SELECT article_id, count(*) FROM embedding_stores WHERE article_id IN (#{listed}) GROUP BY article_id"
  ).to_h { |id, count| [id.to_i, count.to_i] }
  embeddable = rows.reject { |_, title| InferenceTasks::Screen.refusal(title, max_chars: 20_000) }
  reference = embeddable.each_slice(256).flat_map do |slice|
    INFERENCE.embed(slice.map { |row| row[1] }, model: Article::EMBEDDING_MODEL, timeout: 60)["embeddings"]
  end
  expected = embeddable.map(&:first).zip(reference).to_h
  rows.to_h do |id, _, vector, task|
    cosine = vector && expected[id] && vector.zip(expected[id]).sum { |a, b| a * b }
    [id.to_s, { "stores" => stores.fetch(id, 0), "vector" => !vector.nil?, "cosine" => cosine, "task" => task }]
  end
end

$stdout.sync = true
input = JSON.parse(ARGV.fetch(1, "{}"))
answer = case ARGV.fetch(0)
         when "setup" then setup
         when "create" then create(input.fetch("titles"))
         when "search" then search(input.fetch("queries"), input.fetch("limit", 5))
         when "backfill" then backfill(input.fetch("batch_size", 32), input.fetch("pause", false), input["edit"])
         when "fill" then fill
         when "edit" then edit(input.fetch("titles"))
         when "instant" then instant(input.fetch("title"), input.fetch("edit_id"), input.fetch("edit_title"))
         when "late" then late(input.fetch("old"), input.fetch("new"))
         when "twice" then twice(input.fetch("titles"))
         when "push" then push(input.fetch("ids"))
         when "verify" then verify(input.fetch("ids"))
         else raise ArgumentError, "unknown command #{ARGV[0].inspect}"
         end
puts JSON.generate(answer)

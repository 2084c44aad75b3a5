# frozen_string_literal: true

# lib/tasks/embeddings.rake: `bin/rails embeddings:backfill` (BATCH_SIZE=32) embeds every article with no
# vector, a stale one, or a request older than requeue_after, printing progress; stop it at any point and run
# it again. Schedule it (cron, every few minutes): it is what asks again for a row whose task was lost.
namespace :embeddings do
  desc "Embed every article that has no vector, one another model made, or a request that never came back"
  task backfill: :environment do
    batch_size = Integer(ENV.fetch("BATCH_SIZE", "32"))
    report = Article.backfill_embeddings(batch_size: batch_size) do |progress|
      puts "#{progress.enqueued}/#{progress.due} enqueued " \
           "(#{progress.waits} waits on a full queue, #{progress.skipped} skipped)"
    end
    puts "done: #{report.enqueued} articles in #{report.batches} tasks for #{report.identity}; the replies store them"
  end
end

# frozen_string_literal: true

# lib/tasks/embeddings.rake: `bin/rails embeddings:backfill` (BATCH_SIZE=32) embeds every article with no
# vector or a stale one, printing progress; stop it at any point and run it again.
namespace :embeddings do
  desc "Embed every article that has no vector, or one a model other than the serving one made"
  task backfill: :environment do
    batch_size = Integer(ENV.fetch("BATCH_SIZE", "32"))
    report = Article.backfill_embeddings(batch_size: batch_size) do |progress|
      puts "#{progress.enqueued}/#{progress.stale - progress.waiting} enqueued " \
           "(#{progress.waits} waits on a full queue, #{progress.skipped} blank)"
    end
    puts "done: #{report.enqueued} articles in #{report.batches} tasks for #{report.identity}; the replies store them"
  end
end

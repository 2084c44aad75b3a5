# frozen_string_literal: true

# A minimal Rails app around deploy/rails, for tests/external/test_rails_pgvector.py. Its root IS deploy/rails,
# so the files shipped there (app/models, app/jobs, app/types, config/initializers, db/migrate) load exactly as
# they would in a real app; only what every Rails app has of its own (this file, ApplicationRecord,
# ApplicationJob, the table before the migration) lives here. Debian's Rails 6.1 packages, offline;
# PostgreSQL with pgvector from DATABASE_URL. The client is the built and installed gem (GEM_PATH set by the
# test), required by name as Bundler would.
require "logger"
require "rails"
require "active_record/railtie"
require "active_job/railtie"
require "sidekiq"
require "inference_tasks"

module InferenceTasksTestApp
  class Application < Rails::Application
    config.root = File.expand_path("../../../deploy/rails", __dir__)
    config.load_defaults 6.1
    config.eager_load = false
    config.secret_key_base = "test-only"
    config.logger = Logger.new(ENV.fetch("RAILS_LOG", $stdout))
    config.log_level = :info
    config.active_job.queue_adapter = :sidekiq
    config.autoload_paths << File.expand_path("../app/models", __dir__)
    config.autoload_paths << File.expand_path("../app/jobs", __dir__)
  end
end

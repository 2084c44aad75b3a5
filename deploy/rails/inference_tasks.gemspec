# frozen_string_literal: true

require_relative "lib/inference_tasks/version"

Gem::Specification.new do |spec|
  spec.name = "inference_tasks"
  spec.version = InferenceTasks::VERSION
  spec.summary = "Enqueue embedding and classification tasks for inference_tasks' Python workers, from Ruby"
  spec.description = <<~TEXT
    Pushes Celery protocol v2 tasks straight into Redis for inference_tasks' Celery workers (no HTTP
    hop, no Python in your app) and reads their results: blocking calls, polling, or a reply job
    (plain Sidekiq or ActiveJob) when the task finishes. Depends only on the redis gem.
  TEXT
  spec.authors = ["inference_tasks developers"]
  spec.files = Dir[File.join(__dir__, "lib", "**", "*.rb")].map { |path| path.delete_prefix("#{__dir__}/") } +
               ["README.md"]
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 3.0"
  spec.add_runtime_dependency "redis", ">= 4.8", "< 6"
  spec.metadata["rubygems_mfa_required"] = "true"
end

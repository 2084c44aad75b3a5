# frozen_string_literal: true

# Every Rails app has its own ApplicationJob; the shipped job (deploy/rails/app/jobs) inherits it.
class ApplicationJob < ActiveJob::Base
end

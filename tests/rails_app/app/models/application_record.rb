# frozen_string_literal: true

# Every Rails app has this file; deploy/rails/app/models/article.rb inherits from it.
class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

# frozen_string_literal: true

# Driven by tests/external/test_rails_app.py: inside the Rails app (tests/rails_app, rooted at deploy/rails),
# create the articles table and save two articles; each after_commit enqueues an embed task with an
# ActiveJob reply (deploy/rails/app/models/article.rb). Prints their ids and creation times.
require_relative "../rails_app/config/environment"

ActiveRecord::Schema.verbose = false
ActiveRecord::Schema.define do
  create_table :articles, force: true do |t|
    t.string :title
    t.json :embedding
    t.timestamps
  end
end

good = Article.create!(title: "Red running shoes for trail races")
bad = Article.create!(title: "   ") # blank: the worker refuses it, the job takes its failure branch
puts JSON.generate({ "good" => good.id, "bad" => bad.id, "good_created_at" => good.created_at.to_f })

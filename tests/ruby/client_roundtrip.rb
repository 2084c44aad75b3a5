# frozen_string_literal: true

# Driven by tests/test_ruby_client.py: the Ruby client against a real worker; prints one JSON report.
$LOAD_PATH.unshift(File.expand_path("../../deploy/rails/lib", __dir__))
require "inference_tasks"

client = InferenceTasks::Client.new(redis: Redis.new(url: ENV.fetch("REDIS_URL")))
report = {}

embedded = client.embed(["The cat sleeps on the sofa.", "Quarterly revenue grew.", "Reset my password"], timeout: 60)
report["embed"] = { "model" => embedded["model"], "dim" => embedded["dim"],
                    "count" => embedded["embeddings"].size, "first" => embedded["embeddings"][0] }

report["classify"] = client.classify(
  ["The striker scored twice in the football match.", "Simmer the sauce with garlic and basil."],
  %w[sports cooking finance], timeout: 60
).map { |prediction| prediction["label"] }

urgent = client.enqueue_embed(["an urgent one"], priority: 3)
report["priority_result_dim"] = client.wait(urgent, timeout: 60)["dim"]

begin
  client.embed([42], timeout: 60)
  report["failure"] = nil
rescue InferenceTasks::TaskFailed => e
  report["failure"] = { "class" => e.class.name, "remote_type" => e.remote_type, "message" => e.message,
                        "task_id" => e.task_id }
end

begin
  client.wait(SecureRandom.uuid, timeout: 0.3)
rescue InferenceTasks::Timeout => e
  report["timeout"] = e.message
end

rows = File.readlines(File.expand_path("../../data/support_tickets.jsonl", __dir__)).map { |line| JSON.parse(line) }
training = client.enqueue_train_classifier("ruby-trained", rows.map { |r| r["text"] }, rows.map { |r| r["label"] })
trained = client.wait(training, timeout: 300)
report["trained"] = { "version" => trained["version"], "accuracy" => trained["metrics"]["held_out_accuracy"] }
report["with_head"] = client.wait(
  client.enqueue_classify_with("ruby-trained", ["My parcel never arrived and tracking is broken."]), timeout: 60
).map { |prediction| prediction["label"] }

puts JSON.generate(report)

# frozen_string_literal: true

require_relative "test_helper"

# The pgvector pieces that need no database: the vector's text form both ways, a result's model identity,
# and the arguments VectorRows and Backfill refuse. tests/external/test_rails_pgvector.py runs them against
# a real PostgreSQL with pgvector.
class PgvectorTest < Minitest::Test
  include InferenceTasksTest

  def test_a_vector_round_trips_through_pgvectors_text_form
    vector = [0.1, -2.5e-05, 3, 0.30000001192092896]
    text = InferenceTasks::Pgvector.literal(vector)
    assert_equal "[0.1,-2.5e-05,3.0,0.30000001192092896]", text
    assert_equal vector.map(&:to_f), InferenceTasks::Pgvector.parse(text)
    assert_equal [1.0, -2.0], InferenceTasks::Pgvector.parse(" [1,-2] ")
    assert_nil InferenceTasks::Pgvector.parse(nil)
  end

  def test_what_is_not_a_vector_is_refused_with_the_reason
    error = assert_raises(ArgumentError) { InferenceTasks::Pgvector.literal([1.0, Float::NAN]) }
    assert_includes error.message, "finite numbers only"
    assert_raises(ArgumentError) { InferenceTasks::Pgvector.literal([1.0, "2"]) }
    assert_raises(ArgumentError) { InferenceTasks::Pgvector.literal("[1,2]") }
    assert_includes assert_raises(ArgumentError) { InferenceTasks::Pgvector.parse("{1,2}") }.message, "not a pgvector value"
    assert_raises(ArgumentError) { InferenceTasks::Pgvector.parse("[1,x]") }
  end

  def test_a_results_model_identity_is_its_alias_and_revision
    assert_equal "minilm@844930744b40",
                 InferenceTasks.model_identity({ "alias" => "minilm", "revision" => "844930744b40", "model" => "x" })
    error = assert_raises(ArgumentError) { InferenceTasks.model_identity({ "alias" => "minilm", "revision" => nil }) }
    assert_includes error.message, "no revision"
  end

  def test_the_live_worker_names_its_revision_in_every_vector_result
    result = client.embed(["Red running shoes"], timeout: TIMEOUT)
    assert_match(/\A[0-9a-f]{12}\z/, result["revision"])
    assert_equal "#{result['alias']}@#{result['revision']}", InferenceTasks.model_identity(result)
  end

  def test_vector_rows_and_backfill_refuse_wrong_arguments_naming_them
    error = assert_raises(ArgumentError) { InferenceTasks::VectorRows.new(Object, text: :title, columns: { vectors: :x }) }
    assert_includes error.message, "unknown keys [:vectors]"
    assert_includes assert_raises(ArgumentError) { InferenceTasks::VectorRows.new(Object, text: nil) }.message, "text:"
    rows = InferenceTasks::VectorRows.new(Object, text: :title)
    sync = InferenceTasks::VectorSync.new(client: client, rows: rows, reply_job: "Job")
    error = assert_raises(ArgumentError) { InferenceTasks::Backfill.new(sync: sync, batch_size: 0) }
    assert_includes error.message, "batch_size must be a positive Integer, got 0"
    error = assert_raises(ArgumentError) { InferenceTasks::Backfill.new(sync: sync, requeue_after: -1) }
    assert_includes error.message, "requeue_after must be a positive number of seconds, got -1"
    error = assert_raises(ArgumentError) { InferenceTasks::Backfill.new(sync: sync, max_wait: "long") }
    assert_includes error.message, "max_wait must be a number of seconds >= 0"
  end

  def test_texts_the_worker_would_refuse_are_screened_with_the_reason
    screen = InferenceTasks::Screen
    assert_nil screen.refusal("Red running shoes", max_chars: 20)
    assert_equal "its text is empty or blank", screen.refusal("\u00a0\u2003 \t")
    assert_equal "its text is empty or blank", screen.refusal("")
    assert_equal "it has no text", screen.refusal(nil)
    assert_nil screen.refusal("\u200b") # a zero-width space is not whitespace to the worker either
    assert_includes screen.refusal("a" * 21, max_chars: 20), "has 21 characters, more than the fleet's limit of 20"
    assert_nil screen.refusal("é" * 20, max_chars: 20) # characters, not bytes, as the worker counts them
    assert_equal "its text is not valid UTF-8", screen.refusal("caf\xC3".dup.force_encoding("UTF-8"))
  end

  def test_the_live_worker_says_its_limits_and_identity
    info = client.worker_info(timeout: TIMEOUT)
    assert_equal({ "texts_per_task" => 256, "text_chars" => 20_000 }, info["limits"])
    assert_match(/\A[0-9a-f]{12}\z/, info["revision"])
    assert_equal client.embed(["x"], timeout: TIMEOUT)["revision"], info["revision"]
  end
end

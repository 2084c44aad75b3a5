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
    error = assert_raises(ArgumentError) { InferenceTasks::VectorRows.new(Object, columns: { vectors: :x }) }
    assert_includes error.message, "unknown keys [:vectors]"
    rows = InferenceTasks::VectorRows.new(Object)
    error = assert_raises(ArgumentError) do
      InferenceTasks::Backfill.new(client: client, rows: rows, text: :title, reply_job: "Job", batch_size: 0)
    end
    assert_includes error.message, "batch_size must be an Integer in 1..1024"
    error = assert_raises(ArgumentError) do
      InferenceTasks::Backfill.new(client: client, rows: rows, text: :title, reply_job: "Job", requeue_after: -1)
    end
    assert_includes error.message, "requeue_after"
  end
end

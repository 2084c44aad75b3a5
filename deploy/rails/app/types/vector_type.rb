# frozen_string_literal: true

# app/types/vector_type.rb: a pgvector column as an Array of Floats in Ruby (Article: attribute :embedding,
# VectorType.new). Written to the database in pgvector's text form, "[0.1,-0.2,...]", and read back from it
# (InferenceTasks::Pgvector). Rails 6.1 does not know the vector type; without this attribute it reads the
# column as a String.
class VectorType < ActiveRecord::Type::Value
  def type
    :vector
  end

  # From Ruby (an Array, or pgvector's text) to the attribute's value: an Array of Floats.
  def cast(value)
    value.is_a?(String) ? InferenceTasks::Pgvector.parse(value) : value&.map(&:to_f)
  end

  def deserialize(value)
    InferenceTasks::Pgvector.parse(value)
  end

  def serialize(value)
    return nil if value.nil?

    InferenceTasks::Pgvector.literal(value.is_a?(String) ? InferenceTasks::Pgvector.parse(value) : value)
  end
end

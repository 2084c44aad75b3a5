# frozen_string_literal: true

module InferenceTasks
  # pgvector's text form of a vector, "[0.1,-0.2,...]", both ways: what an UPDATE or a `<=>` query sends and
  # what a SELECT of a vector column returns. Small on purpose: the neighbor gem does this and more, where it
  # can be installed.
  module Pgvector
    module_function

    # A vector as pgvector reads it; raises ArgumentError for anything but finite numbers.
    def literal(vector)
      raise ArgumentError, "a vector must be an Array of numbers, got #{vector.class}" unless vector.is_a?(Array)

      numbers = vector.map do |value|
        unless value.is_a?(Numeric) && value.to_f.finite?
          raise ArgumentError, "a vector holds finite numbers only, got #{value.inspect}"
        end

        value.to_f
      end
      "[#{numbers.join(',')}]"
    end

    # The Floats of pgvector's text form ("[1,2.5,-3e-05]"); nil stays nil.
    def parse(text)
      return nil if text.nil?

      body = text.strip
      unless body.start_with?("[") && body.end_with?("]")
        raise ArgumentError, "not a pgvector value: #{text[0, 40].inspect}"
      end

      body[1...-1].split(",").map { |part| Float(part) }
    end
  end
end

# frozen_string_literal: true

module InferenceTasks
  # The worker's rules for one text (inference_tasks/validation.py), applied before a push so that a text the
  # worker would refuse costs only its own row, never its batch-mates'. Blank is the worker's blank: Python's
  # str.strip(), which strips every Unicode whitespace character (a title of only non-breaking spaces is
  # blank there), not Ruby's String#strip, which strips ASCII whitespace only. tests/unit pins WHITESPACE to
  # Python's str.isspace() over every code point.
  module Screen
    # Python's str.isspace(): Unicode category Zs, or bidirectional class WS, B or S.
    WHITESPACE = "\t\n\v\f\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    BLANK = /\A[#{WHITESPACE}]*\z/

    module_function

    # Why the worker would refuse `text` (nil: it would embed it). max_chars: the fleet's per-text limit
    # (worker_info "limits" "text_chars"); nil skips the length check.
    def refusal(text, max_chars: nil)
      return "it has no text" if text.nil?

      text = text.to_s
      text = text.encode(Encoding::UTF_8) unless text.encoding == Encoding::UTF_8
      return "its text is not valid UTF-8" unless text.valid_encoding?
      return "its text is empty or blank" if BLANK.match?(text)
      if max_chars && text.length > max_chars
        return "its text has #{text.length} characters, more than the fleet's limit of #{max_chars} per text " \
               "(INFERENCE_MAX_TEXT_CHARS)"
      end

      nil
    rescue EncodingError
      "its text cannot be read as UTF-8"
    end
  end
end

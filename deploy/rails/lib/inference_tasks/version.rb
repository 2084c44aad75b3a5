# frozen_string_literal: true

module InferenceTasks
  # The gem's version, kept equal to the Python package's (pyproject.toml): one release, two clients.
  VERSION = "0.1.0"
end

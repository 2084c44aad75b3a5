"""Helpers the tests share: waiting on conditions, required programs, pytest-celery nodes, event capture."""

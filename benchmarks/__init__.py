"""Side-by-side measurements: a small library (harness/) and one short script per question.

Run each from the repository root as a module, e.g. `.venv/bin/python -m benchmarks.serving --quick`;
docs/benchmarks.md lists them with their figures.
"""

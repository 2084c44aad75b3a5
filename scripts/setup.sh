#!/usr/bin/env bash
# Install what inference_tasks needs on a fresh Debian machine; safe to run again.
#   - redis-server, openssl, Ruby with the redis and sidekiq gems (for the Rails client and its
#     tests) from Debian (sudo if not root); with WITH_TEST_TOOLS=1 (scripts/test.sh) also chromium,
#     for the headless-browser check of Flower, systemd-analyze, for the unit-file checks, iproute2 for
#     the simulated hosts, and Rails
#     (railties, activerecord, activejob, sqlite3) and minitest, for the gem's suite and running deploy/rails
#     inside a real Rails app
#   - a virtual environment in .venv (VENV=... to move it) with torch==2.13.0 (CPU build, pinned by
#     constraints.txt so no later install swaps in a multi-GB CUDA build) and this package.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v openssl >/dev/null || missing+=(openssl)
command -v ruby >/dev/null || missing+=(ruby)
ruby -e 'require "redis"' 2>/dev/null || missing+=(ruby-redis)
command -v sidekiq >/dev/null || missing+=(ruby-sidekiq)
if [ "${WITH_TEST_TOOLS:-0}" = 1 ]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v systemd-analyze >/dev/null || missing+=(systemd)
  # Rails 6.1 from Debian: tests/test_rails_app.py runs deploy/rails inside a real Rails app.
  ruby -e 'require "rails"; require "active_record"; require "active_job"; require "sqlite3"' 2>/dev/null ||
    missing+=(ruby-railties ruby-activerecord ruby-activejob ruby-sqlite3)
  # Simulated hosts (tests/test_hosts.py): network namespaces, veth, a bridge; unshare for hostnames.
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  # The gem's own suite (deploy/rails/test), run by tests/test_gem.py.
  ruby -e 'require "minitest"' 2>/dev/null || missing+=(ruby-minitest)
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} with apt-get"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
# torch first and exactly, then everything else under the same constraint.
"$VENV/bin/python" -m pip install -q -c constraints.txt "torch==2.13.0"
"$VENV/bin/python" -m pip install -q -c constraints.txt -e ".[dev,flower,bench,openvino,multilingual]"
"$VENV/bin/python" -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
echo "setup: ready ($("$VENV/bin/python" -c 'import torch, celery; print(f"torch {torch.__version__}, celery {celery.__version__}")'))"
# INFERENCE_BACKEND=openvino: export the model once (offline, ~5 s) into INFERENCE_MODEL_CACHE.
if [ "${INFERENCE_BACKEND:-torch}" = openvino ]; then
  "$VENV/bin/inference-tasks" export-model --backend openvino
fi

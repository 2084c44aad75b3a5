#!/usr/bin/env bash
# Refresh the lock, then let the suite decide (bash scripts/test.sh):
#   bash scripts/lock.sh                          re-resolve, keeping every locked version that still fits
#                                                 (after a change to pyproject.toml's dependencies)
#   bash scripts/lock.sh --upgrade                every package to its newest release
#   bash scripts/lock.sh --upgrade-package redis  one package (repeat the flag for more)
# Writes requirements/dev.lock (everything scripts/setup.sh installs: base, every extra, the dev tools,
# torch CPU, pip, setuptools) and requirements/deploy.lock (the image's: base, flower, openvino, ctranslate2, tracing, gateway,
# multilingual, static, at the same versions), and benchmarks/peers/infinity.lock (the serving benchmark's
# peer, in a venv of its own). All are for CPython 3.11 on Linux x86_64, with a sha256 for
# every file. torch's CPU build comes from TORCH_FIND_LINKS: /opt/wheels where that folder holds it,
# else PyTorch's CPU index page.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
source scripts/torch_wheels.sh
compile=("$VENV/bin/uv" pip compile --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
  --find-links "$TORCH_FIND_LINKS" --custom-compile-command "bash scripts/lock.sh")
"${compile[@]}" pyproject.toml requirements/pins.in --all-extras -o requirements/dev.lock "$@"
# The image's lock: resolved under dev.lock, so both hold the same version of every package they share.
"${compile[@]}" pyproject.toml requirements/pins.in --extra flower --extra openvino --extra ctranslate2 --extra multilingual \
  --extra tracing --extra static --extra gateway --constraint requirements/dev.lock --no-emit-package pip -o requirements/deploy.lock
# The serving benchmark's peer, Infinity, in a venv of its own (benchmarks/peers/setup_infinity.sh).
"${compile[@]}" benchmarks/peers/infinity.in -o benchmarks/peers/infinity.lock "$@"
# The official OpenAI client the gateway's tests drive, in a venv of its own (scripts/setup_openai_client.sh).
"${compile[@]}" requirements/openai-client.in -o requirements/openai-client.lock "$@"
echo "lock: requirements/dev.lock $(grep -c '^[a-z0-9]' requirements/dev.lock) packages," \
  "requirements/deploy.lock $(grep -c '^[a-z0-9]' requirements/deploy.lock)"

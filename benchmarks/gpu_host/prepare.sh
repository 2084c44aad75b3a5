#!/usr/bin/env bash
# Builds .gpu-carry/ here (a machine with the package registries) for benchmarks/gpu_host/run.sh on a
# GPU host that reaches nothing: the locked wheels of what that host's image lacks (Python 3.12,
# manylinux), Debian's redis-server and its two libraries, and the default model with its weights
# stored as float16 (the carried tree must stay under 64 MiB; the weights are widened back to
# float32 on load, see docs/benchmarks-log.md "GPU"). Versions come from requirements/dev.lock.
#
#   bash benchmarks/gpu_host/prepare.sh        # then carry .gpu-carry (git ignores it)
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=.gpu-carry
PYTHON=${PYTHON:-.venv/bin/python}
# Locked packages the GPU image (PyTorch's CUDA image, docs/benchmarks-log.md "GPU") does not hold, or
# holds at a version below our floor (sentence-transformers 6.0.1 there, >=6.2 here).
MISSING="amqp billiard celery click-didyoumean click-plugins click-repl kombu prompt-toolkit vine wcwidth
 redis hiredis orjson sentence-transformers fastapi starlette uvicorn pydantic pydantic-core annotated-types
 typing-inspection tzlocal click typing-extensions opentelemetry-api"
rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/debs"
for name in $MISSING; do
  pin=$(grep -i "^${name}==" requirements/dev.lock | cut -d' ' -f1)
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$CARRY/wheels" "$pin"
done
(cd "$CARRY/debs" && apt-get download -q redis-tools libjemalloc2 liblzf1 >/dev/null)
"$PYTHON" -m benchmarks.gpu_host.carry_model "$CARRY/model"
du -sh "$CARRY"/* && du -sh "$CARRY"

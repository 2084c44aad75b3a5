#!/usr/bin/env bash
# On a GPU host that reaches nothing (the device tool's machine): install what .gpu-carry holds
# (benchmarks/gpu_host/prepare.sh made it) beside the host's own CUDA torch, then run the GPU check.
# The host's torch is used as it is: a CUDA build of torch 2.13 is several GB of wheels, which no
# carry of 64 MiB can take and the host cannot download (docs/benchmarks-log.md "GPU").
#
#   bash benchmarks/gpu_host/run.sh [gpu_check arguments]      # report: $OUT/gpu_check.json if OUT is set
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=.gpu-carry
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$CARRY"/wheels/*.whl
# Debian's redis-server 7.0 (the suite's) and the two libraries it needs, unpacked outside /.
REDIS_ROOT=/tmp/gpu-host-redis
mkdir -p "$REDIS_ROOT"
for deb in "$CARRY"/debs/*.deb; do dpkg -x "$deb" "$REDIS_ROOT"; done
ln -sf redis-check-rdb "$REDIS_ROOT/usr/bin/redis-server"
export PATH="$REDIS_ROOT/usr/bin:$PATH"
export LD_LIBRARY_PATH="$REDIS_ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# The model as carried (float16 weights, widened to float32 on load) for every worker and the HTTP service.
export INFERENCE_MODEL="$PWD/$CARRY/model" BENCH_MODEL="$PWD/$CARRY/model"
redis-server --version
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available())"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin 2>/dev/null || true
out=${OUT:-benchmarks/results}
# Bounded below the device's 10-minute call: TERM stops the workers, and the report holds every section done.
timeout -s TERM "${GPU_CHECK_LIMIT_S:-360}" python3 -m benchmarks.gpu_check --reference "$CARRY/reference.json" --out "$out/gpu_check.json" "$@"

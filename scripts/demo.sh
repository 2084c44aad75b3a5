#!/usr/bin/env bash
# The main job end to end on local defaults: set up, start Redis (unless one already answers on
# REDIS_URL's default 127.0.0.1:6379) and an inference worker, enqueue a batch, print the
# embeddings' shape and a classification, then stop what it started (TERM = Celery's warm shutdown).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VENV:-.venv}
RUN_DIR=.run
mkdir -p "$RUN_DIR"
redis_pid="" worker_pid=""

cleanup() {
  if [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null; then
    kill -TERM "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
  fi
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
    kill -TERM "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "demo: using the Redis already running on 127.0.0.1:6379"
else
  echo "demo: starting redis-server on 127.0.0.1:6379 (log: $RUN_DIR/redis.log)"
  redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir "$RUN_DIR" \
    --logfile redis.log &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

echo "demo: starting an inference worker (log: $RUN_DIR/worker.log)"
"$VENV/bin/celery" -A inference_tasks worker -Q inference -n demo@%h -l info >"$RUN_DIR/worker.log" 2>&1 &
worker_pid=$!

"$VENV/bin/python" examples/enqueue_batch.py

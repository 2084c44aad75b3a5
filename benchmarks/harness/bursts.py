"""One-text tasks pushed at once by many producers, as a Rails app's after_commit hooks would, and
their results read back in bulk: raw protocol messages (as the Ruby client sends them), so the
harness's own CPU stays small and equal for every configuration it is compared with."""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime

import redis

from benchmarks.harness.runner import run_threads
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support import localstack
from tests.support.wire import encode, task_message

RESULT_TIMEOUT_S = 600


def collect(redis_url: str, task_ids: list[str]) -> tuple[dict[str, float], int]:
    """When each task's result was stored (Celery's date_done), read in bulk from the backend; and
    how many failed. MGET polling instead of one result subscription per task keeps the harness's
    own CPU, which shares the machine with the worker, small and equal for both configurations."""
    client = redis.Redis.from_url(redis_url)
    pending, done, errors = list(task_ids), {}, 0
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        waiting = []
        for task_id, raw in zip(pending, client.mget([f"celery-task-meta-{i}" for i in pending]), strict=True):
            meta = json.loads(raw) if raw else {}
            if meta.get("status") == "SUCCESS" and len(meta["result"]["embeddings"]) == 1:
                done[task_id] = datetime.fromisoformat(meta["date_done"]).timestamp()
            elif meta.get("status") in ("FAILURE", "REVOKED", "SUCCESS"):
                errors += 1
            else:
                waiting.append(task_id)
        pending = waiting
        if pending:
            time.sleep(0.05)
    return done, errors + len(pending)


def one_text_burst(worker: localstack.WorkerProcess, texts: list[str], producers: int) -> dict:
    """Every producer pushes its share at once, as a Rails app's client would (one LPUSH per task,
    pipelined), without waiting; then every result is read back from the backend."""
    shares = [texts[i::producers] for i in range(producers)]
    sent: list[list[tuple[float, str]]] = [[] for _ in range(producers)]

    def produce(index: int) -> None:
        client = redis.Redis.from_url(worker.redis_url)
        messages = [task_message(EMBED_TASK, [[text]]) for text in shares[index]]
        with client.pipeline(transaction=False) as pipe:
            for message in messages:
                pipe.lpush(INFERENCE_QUEUE, encode(message))
            at = time.time()
            pipe.execute()
        sent[index] = [(at, message["headers"]["id"]) for message in messages]

    run_threads(produce, producers, indexed=True)
    sends = list(itertools.chain.from_iterable(sent))
    done, errors = collect(worker.redis_url, [task_id for _, task_id in sends])
    latencies = [done[task_id] - at for at, task_id in sends if task_id in done]
    first_sent, last_sent = min(at for at, _ in sends), max(at for at, _ in sends)
    return {
        "tasks": len(texts),
        "wall_s": max(done.values()) - first_sent,
        "enqueue_s": last_sent - first_sent,
        "latencies": latencies,
        "errors": errors,
    }

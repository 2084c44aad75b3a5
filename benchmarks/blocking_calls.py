"""Blocking one-text calls from Ruby and Python against raw push to stored result (issue 64, item 3), on
one worker, side by side in one run: idle, and under a bulk backfill at a lower priority.

One worker (the default runtime, 2 children) on its own redis-server. Each round runs, in alternated
order: the gem's blocking `embed` (benchmarks/blocking_calls.rb, one Ruby process per round, its
warm-up calls not counted) and the Python client's blocking call, whose rows also give raw push to
stored result (the send stamp taken just before the LPUSH to the result's own `date_done`:
harness/pushes.py), the floor any client can reach. One call at a time, a short pause between, so
the worker is idle at every push. Then the same under load: a Python thread keeps priority-9
64-text tasks waiting (the backfill) while the calls go at priority 0, served first.

    .venv/bin/python -m benchmarks.blocking_calls            # ~2 minutes
    .venv/bin/python -m benchmarks.blocking_calls --worker-cpus 1   # the worker on CPU 1, clients and Redis on the rest
    .venv/bin/python -m benchmarks.blocking_calls --quick

On a 2-core host the clients share the worker's cores; `--worker-cpus` gives the worker CPUs of its own,
as a Rails app on other hosts would (the harness, the Ruby client and redis-server get the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.host import on_cpus
from benchmarks.harness.pushes import PushStamps, one_text_timed
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.stats import percentile
from benchmarks.harness.workload import REPO_ROOT, ticket_texts
from benchmarks.serving import confine
from inference_tasks.producer import send
from inference_tasks.redis_access.connections import broker_redis
from inference_tasks.redis_access.queue_state import queue_depth
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.localstack import clean_env, start_redis, start_worker

PAUSE_S = 0.02
WARM_CALLS = 10
# The backfill: 64-text tasks at priority 9, this many kept waiting.
BACKFILL_DEPTH = 4
BACKFILL_PRIORITY = 9
RUBY_SCRIPT = REPO_ROOT / "benchmarks" / "blocking_calls.rb"
GOAL_OVER_RAW_MS = 1.5


def ruby_calls(redis_url: str, count: int) -> list[float]:
    """Wall ms of `count` blocking one-text calls from the gem."""
    command = ["ruby", str(RUBY_SCRIPT), str(count), str(PAUSE_S), str(WARM_CALLS)]
    done = subprocess.run(command, env=clean_env(os.environ, REDIS_URL=redis_url), capture_output=True, text=True,
                          timeout=600, check=True)  # fmt: skip
    return [float(ms) for ms in json.loads(done.stdout.strip().splitlines()[-1])]


def python_calls(app: Any, stamps: PushStamps, texts: list[str], count: int) -> list[tuple[float, ...]]:
    """`count` blocking one-text calls from the Python client (harness/pushes.py rows), after warm-up."""
    rows = []
    for index in range(WARM_CALLS + count):
        threading.Event().wait(PAUSE_S)
        rows.append(one_text_timed(app, stamps, texts[index % len(texts)]))
    return rows[WARM_CALLS:]


class Backfill:
    """Keeps BACKFILL_DEPTH priority-9 64-text tasks waiting on the inference queue until stopped."""

    def __init__(self, app: Any, texts: list[str]) -> None:
        self.app, self.texts, self.done = app, texts, threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        client = broker_redis(self.app.settings)
        while not self.done.is_set():
            if queue_depth(client, INFERENCE_QUEUE) < BACKFILL_DEPTH:
                batch = [self.texts[(self.sent * 64 + i) % len(self.texts)] for i in range(64)]
                send(self.app, EMBED_TASK, args=[batch], priority=BACKFILL_PRIORITY, ignore_result=True)
                self.sent += 1
            else:
                self.done.wait(0.005)

    def __enter__(self) -> Backfill:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join(timeout=10)


def summary(took_ms: list[float]) -> dict[str, float]:
    return {"calls": len(took_ms), "p50_ms": statistics.median(took_ms), "p99_ms": percentile(took_ms, 0.99)}


def measure(worker: Any, stamps: PushStamps, texts: list[str], calls: int, rounds: int) -> dict[str, Any]:
    """Ruby and Python rounds, alternated; the raw push-to-stored figures from the Python rows."""
    ruby_ms: list[float] = []
    rows: list[tuple[float, ...]] = []
    for _, client in alternated(["ruby", "python"], rounds):
        if client == "ruby":
            ruby_ms += ruby_calls(worker.redis_url, calls)
        else:
            rows += python_calls(worker.app, stamps, texts, calls)
    return {
        "ruby_blocking": summary(ruby_ms),
        "python_blocking": summary([row[0] for row in rows]),
        "raw_push_to_stored": summary([row[4] for row in rows]),
        "task_own_work_p50_ms": statistics.median(row[3] for row in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per client and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--worker-cpus", default="", help="CPUs for the worker, e.g. '1' (the clients and Redis get the rest)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = REPO_ROOT / "benchmarks" / "results"
    args.out = args.out or results / ("blocking_calls-worker-cpus.json" if args.worker_cpus else "blocking_calls.json")
    if args.quick:
        args.calls, args.rounds = 10, 2
    _, worker_cpus = confine(args)
    work = Path(tempfile.mkdtemp(prefix="bench-blocking-"))
    server = start_redis(work / "redis")
    worker = on_cpus(worker_cpus, start_worker, "blocking-calls", server.url(0), work, dict(os.environ), backend="auto",
                     concurrency=2)  # fmt: skip
    texts, stamps = ticket_texts(), PushStamps()
    try:
        idle = measure(worker, stamps, texts, args.calls, args.rounds)
        with Backfill(worker.app, texts) as backfill:
            loaded = measure(worker, stamps, texts, args.calls, args.rounds)
        loaded["backfill_tasks_sent"] = backfill.sent
    finally:
        stamps.close()
        worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    where = f"on CPUs {sorted(worker_cpus)}, clients and Redis on the others" if worker_cpus else "sharing every CPU"
    print(f"CPU: {cpu_name()}; one worker (2 children, the default runtime) {where}, one call at a time")
    for label, found in (("idle", idle), (f"under a priority-{BACKFILL_PRIORITY} 64-text backfill", loaded)):
        print(f"  {label}: task's own work p50 {found['task_own_work_p50_ms']:.2f} ms")
        for client in ("raw_push_to_stored", "python_blocking", "ruby_blocking"):
            row = found[client]
            name = client.replace("_", " ")
            print(f"    {name}: p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms ({row['calls']} calls)")
    over = idle["ruby_blocking"]["p50_ms"] - idle["raw_push_to_stored"]["p50_ms"]
    verdict = "met" if over <= GOAL_OVER_RAW_MS else "not met"
    print(
        f"  idle: the gem's blocking p50 is raw push to stored + {over:.2f} ms "
        f"(goal <= {GOAL_OVER_RAW_MS} ms: {verdict})"
    )
    write_report(args.out, "blocking_calls", {"calls_per_round": args.calls, "rounds": args.rounds,
                                              "worker_cpus": sorted(worker_cpus), "idle": idle,
                                              "under_backfill": loaded, "gem_over_raw_p50_ms": over})  # fmt: skip


if __name__ == "__main__":
    main()

"""What the atomic take (broker/fetch.py) costs an idle worker: a one-text task's time from push to
stored result when it arrives on the list the worker's wait watches (priority 0 of the queue the
last task came from), on one it does not watch (priority 5), and alternating between the worker's
two queues (`inference` and the model's own, `inference.minilm`), alternated round by round, by a
worker woken on every push (broker/wakeup.py, the default) and one that waits on one list
(INFERENCE_WAKE_ON_PUSH=false); then tasks sent back to back (the worker never waits). Each worker
one child, micro-batching off, its own database of one redis-server on loopback.

    .venv/bin/python -m benchmarks.take            # ~1 minute
    .venv/bin/python -m benchmarks.take --quick
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.pushes import all_at_once, one_at_a_time
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.stats import percentile
from benchmarks.harness.workload import REPO_ROOT
from inference_tasks.producer import send
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import start_redis, start_worker

# INFERENCE_WAKE_ON_PUSH: woken on every push to its lists, or waiting on one list.
WAKE = {"true": "woken", "false": "one list"}
CONFIGS = {
    "priority 0 (watched)": lambda index: {"priority": 0},
    "priority 5 (not watched)": lambda index: {"priority": 5},
    "two queues, alternating": lambda index: {"model": "minilm"} if index % 2 else {},
}


def sender(app: object, config: str) -> Callable[[int], Any]:
    """Sends one one-text task with the options of `config` for its index."""
    return lambda index: send(app, EMBED_TASK, args=[[f"take latency {index}"]], **CONFIGS[config](index))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60, help="tasks per round and priority")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "take.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.rounds = 10, 1
    work = Path(tempfile.mkdtemp(prefix="bench-take-"))
    server = start_redis(work / "redis")
    workers = {
        wake: start_worker(
            f"take-{wake}", server.url(db), work, dict(os.environ), concurrency=1, microbatch_max_texts=0,
            task_events="false", wake_on_push=wake,
        )
        for db, wake in enumerate(WAKE)
    }  # fmt: skip
    try:
        for worker in workers.values():
            one_at_a_time(sender(worker.app, "priority 0 (watched)"), 5)  # the model warm, connections made
        took: dict[tuple[str, str], list[float]] = {(wake, name): [] for wake in WAKE for name in CONFIGS}
        for _, (wake, name) in alternated(list(took), args.rounds):
            took[wake, name] += one_at_a_time(sender(workers[wake].app, name), args.tasks)
        app = workers["true"].app
        rate = all_at_once(lambda index: send(app, EMBED_TASK, args=[[f"back to back {index}"]]), args.tasks * 4)
    finally:
        for worker in workers.values():
            worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    rows = {
        f"{WAKE[wake]}, {name}": {
            "tasks": len(values),
            "p50_ms": 1000 * percentile(values, 0.5),
            "p99_ms": 1000 * percentile(values, 0.99),
        }
        for (wake, name), values in took.items()
    }
    setup = "two workers (woken, one list), one child each, micro-batching off"
    print(f"CPU: {cpu_name()}; {setup}, {args.rounds} alternated rounds")
    for name, row in rows.items():
        print(f"{name:<44} push to result p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms")
    print(f"back to back ({args.tasks * 4} tasks): {rate:.0f} tasks/s")
    write_report(args.out, "take", {"rounds": args.rounds, "results": rows, "back_to_back_tasks_per_s": rate})


if __name__ == "__main__":
    main()

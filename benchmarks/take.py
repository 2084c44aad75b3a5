"""What the atomic take (broker/fetch.py) costs an idle worker: a one-text task's time from push to
stored result when it arrives on the list the worker's wait watches (priority 0 of the queue the
last task came from), on one it does not watch (priority 5), and alternating between the worker's
two queues (`inference` and the model's own, `inference.minilm`), alternated round by round; then
tasks sent back to back (the worker never waits). One worker, one child, micro-batching off,
redis-server on loopback.

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
    worker = start_worker(
        "take", server.url(0), work, dict(os.environ), concurrency=1, microbatch_max_texts=0, task_events="false"
    )
    try:
        one_at_a_time(sender(worker.app, "priority 0 (watched)"), 5)  # the model warm, connections made
        took: dict[str, list[float]] = {name: [] for name in CONFIGS}
        for _, name in alternated(list(took), args.rounds):
            took[name] += one_at_a_time(sender(worker.app, name), args.tasks)
        rate = all_at_once(lambda index: send(worker.app, EMBED_TASK, args=[[f"back to back {index}"]]), args.tasks * 4)
    finally:
        worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    rows = {
        name: {
            "tasks": len(values),
            "p50_ms": 1000 * percentile(values, 0.5),
            "p99_ms": 1000 * percentile(values, 0.99),
        }
        for name, values in took.items()
    }
    print(f"CPU: {cpu_name()}; one worker, one child, micro-batching off, {args.rounds} alternated rounds")
    for name, row in rows.items():
        print(f"{name:<26} push to result p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms")
    print(f"back to back ({args.tasks * 4} tasks): {rate:.0f} tasks/s")
    write_report(args.out, "take", {"rounds": args.rounds, "results": rows, "back_to_back_tasks_per_s": rate})


if __name__ == "__main__":
    main()

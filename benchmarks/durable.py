"""What a durable push costs: `producer.send(..., durable=True)` (the push, then a fence write and
Redis WAIT for one replica) against a plain send, alternated round by round on one primary with one
replica on loopback, from one producer thread; per-send p50 / p99 and sends/s. The same from the
Ruby client is one pipeline (push + WAIT) and costs the same round trip.

    .venv/bin/python -m benchmarks.durable            # ~30 s
    .venv/bin/python -m benchmarks.durable --quick
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import redis

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.stats import percentile
from benchmarks.harness.workload import REPO_ROOT
from inference_tasks.producer import send
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import producer_app, start_redis, start_replica


def sends(app: object, count: int, durable: bool) -> list[float]:
    """Each send's duration in seconds; the queue is emptied after, so every round starts alike."""
    took = []
    for index in range(count):
        began = time.perf_counter()
        send(app, EMBED_TASK, args=[[f"durable cost {index}"]], durable=durable)
        took.append(time.perf_counter() - began)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=1000, help="sends per round and configuration")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "durable.json")
    args = parser.parse_args()
    if args.quick:
        args.sends, args.rounds = 50, 1
    work = Path(tempfile.mkdtemp(prefix="bench-durable-"))
    primary = start_redis(work / "primary")
    replica = start_replica(primary, work / "replica")
    try:
        app = producer_app(primary.url(0))
        sends(app, 50, True)  # connections made, code paths warm
        took: dict[str, list[float]] = {"plain": [], "durable": []}
        for _, name in alternated(list(took), args.rounds):
            took[name] += sends(app, args.sends, name == "durable")
            redis.Redis(port=primary.port).flushdb()
    finally:
        for server in (replica, primary):
            server.process.terminate()
            server.process.wait(timeout=10)
    rows = {
        name: {
            "sends": len(values),
            "p50_ms": 1000 * percentile(values, 0.5),
            "p99_ms": 1000 * percentile(values, 0.99),
            "sends_per_s": len(values) / sum(values),
        }
        for name, values in took.items()
    }
    print(f"CPU: {cpu_name()}; one producer thread, primary + one replica on loopback, {args.rounds} rounds")
    for name, row in rows.items():
        print(f"{name:<8} p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms  {row['sends_per_s']:7.0f} sends/s")
    print(f"durable - plain: p50 +{rows['durable']['p50_ms'] - rows['plain']['p50_ms']:.2f} ms")
    write_report(args.out, "durable", {"rounds": args.rounds, "results": rows})


if __name__ == "__main__":
    main()

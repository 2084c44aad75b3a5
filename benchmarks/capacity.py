"""Redis capacity per task: commands, bytes and Redis CPU per task, measured on a loopback run of the
shipped worker, and the number of worker cores one Redis primary can feed (docs/scaling.md).

For one-text and 64-text embed tasks (producers collecting and deleting each result, as the clients
do): CONFIG RESETSTAT, run, then INFO commandstats (calls per command), INFO stats (bytes in/out) and
the redis-server process's CPU time. Redis runs commands on one thread, so 1 / (Redis CPU seconds per
task) is the most tasks per second one primary can take; divided by what one worker core completes
per second, it gives the worker cores one primary can feed.

    .venv/bin/python -m benchmarks.capacity           # ~1 minute
    .venv/bin/python -m benchmarks.capacity --quick
    .venv/bin/python -m benchmarks.capacity --split-results --out benchmarks/results/capacity-split.json

With --split-results every workload runs twice in one invocation: results on the broker's Redis, then
on a Redis of their own (INFERENCE_RESULT_REDIS_URL); each row gives the broker's figures, and the
split rows the results server's under "results" (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
from pathlib import Path

import psutil
import redis

from benchmarks.harness.runner import run_threads
from benchmarks.harness.workload import make_batches
from inference_tasks import producer
from inference_tasks.cores import available_cores
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 300
# Keep Redis below this share of its one core: latency grows fast as a single-threaded server nears 100 %.
REDIS_HEADROOM = 0.5


def server_counters(client: redis.Redis, server: psutil.Process) -> tuple[dict[str, int], dict, float]:
    """INFO commandstats calls, INFO stats and the server's CPU seconds, as they stand."""
    commands = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): value["calls"] for name, value in commands.items()}
    calls.pop("info", None)
    calls.pop("config|resetstat", None)
    return calls, client.info("stats"), sum(server.cpu_times()[:2])


def per_task(calls: dict[str, int], stats: dict, redis_cpu: float, tasks: int) -> dict:
    return {
        "redis_commands_per_task": sum(calls.values()) / tasks,
        "top_commands_per_task": {
            name: round(count / tasks, 2) for name, count in sorted(calls.items(), key=lambda kv: -kv[1])[:8]
        },
        "bytes_in_per_task": stats["total_net_input_bytes"] / tasks,
        "bytes_out_per_task": stats["total_net_output_bytes"] / tasks,
        "redis_cpu_ms_per_task": redis_cpu * 1000 / tasks,
        "redis_cpu_ms_per_1000_tasks": redis_cpu * 1000 / tasks * 1000,
    }


def measure(
    worker: localstack.WorkerProcess,
    redis_pid: int,
    batches: list[list[str]],
    producers: int,
    events: bool = True,
    results: tuple[str, int] | None = None,
) -> dict:
    """One workload; the broker's per-task cost, and with `results` (the URL and pid of results' own
    Redis) that server's too, under "results"."""
    servers = {"broker": (worker.redis_url, redis_pid)}
    if results is not None:
        servers["results"] = results
    clients = {name: redis.Redis.from_url(url) for name, (url, _) in servers.items()}
    processes = {name: psutil.Process(pid) for name, (_, pid) in servers.items()}
    for client in clients.values():
        client.config_resetstat()
    cpu_before = {name: sum(process.cpu_times()[:2]) for name, process in processes.items()}
    order = itertools.count()
    extra = {"result_redis_url": results[0]} if results is not None else {}

    def produce() -> None:
        app = localstack.producer_app(worker.redis_url, task_events=events, **extra)
        while (index := next(order)) < len(batches):
            producer.collect(producer.send(app, EMBED_TASK, args=[batches[index]]), timeout=RESULT_TIMEOUT_S)

    began, ended = run_threads(produce, producers)
    tasks = len(batches)
    row: dict = {"tasks": tasks, "texts_per_task": len(batches[0]), "wall_s": ended - began}
    row["tasks_per_s"] = tasks / (ended - began)
    for name in servers:
        calls, stats, cpu = server_counters(clients[name], processes[name])
        figures = per_task(calls, stats, cpu - cpu_before[name], tasks)
        if name == "broker":
            row.update(figures)
        else:
            row[name] = figures
    return row


def run_workloads(work: Path, name: str, args: argparse.Namespace, cores: int, events: bool, split: bool) -> list[dict]:
    """Warm every child, then the one-text and the 64-text workloads, on a fresh broker (and, when
    `split`, a fresh results Redis)."""
    broker = localstack.start_redis(work / f"{name}-broker")
    servers = [broker]
    results = None
    settings: dict = {}
    if split:
        server = localstack.start_redis(work / f"{name}-results")
        servers.append(server)
        results = (server.url(1), server.process.pid)
        settings["result_redis_url"] = server.url(1)
    worker = localstack.start_worker(
        name, broker.url(1), work, os.environ, concurrency=cores, task_events=str(events).lower(), **settings
    )
    try:
        measure(worker, broker.process.pid, make_batches(cores * 4, 8, seed=1), cores, events, results)  # warm up
        one = measure(worker, broker.process.pid, make_batches(args.tasks, 1, seed=2), args.producers, events, results)
        many = measure(
            worker, broker.process.pid, make_batches(args.batches, 64, seed=3), args.producers, events, results
        )
    finally:
        worker.stop()
        for server in servers:
            server.process.terminate()
            server.process.wait(timeout=10)
    return [one, many]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=600, help="one-text tasks")
    parser.add_argument("--batches", type=int, default=60, help="64-text tasks")
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--no-task-events", action="store_true", help="INFERENCE_TASK_EVENTS=false (workers and producers)"
    )
    parser.add_argument(
        "--split-results",
        action="store_true",
        help="also run every workload with INFERENCE_RESULT_REDIS_URL on a second redis-server (side by side)",
    )
    parser.add_argument("--out", type=Path, default=localstack.REPO_ROOT / "benchmarks" / "results" / "capacity.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.batches, args.producers = 40, 6, 4
    cores = available_cores()
    work = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    events = not args.no_task_events
    rows = run_workloads(work, "capacity", args, cores, events, split=False)
    if args.split_results:
        # Side by side in one run: the same workloads with results on a Redis of their own.
        rows += [
            {**row, "results_apart": True} for row in run_workloads(work, "split", args, cores, events, split=True)
        ]
    for row in rows:
        per_core = row["tasks_per_s"] / cores
        redis_max = 1000 / row["redis_cpu_ms_per_task"]
        row["tasks_per_s_per_worker_core"] = per_core
        row["redis_max_tasks_per_s"] = redis_max
        row["worker_cores_per_primary"] = redis_max * REDIS_HEADROOM / per_core
        print(
            f"{row['texts_per_task']:>3}-text tasks: {row['tasks_per_s']:.1f}/s on {cores} cores; per task "
            f"{row['redis_commands_per_task']:.1f} Redis commands, {row['bytes_in_per_task'] / 1024:.1f} KiB in, "
            f"{row['bytes_out_per_task'] / 1024:.1f} KiB out, {row['redis_cpu_ms_per_task']:.3f} ms Redis CPU "
            f"({row['redis_cpu_ms_per_1000_tasks'] / 1000:.2f} s per 1,000 tasks); one primary at "
            f"{REDIS_HEADROOM:.0%} of its core feeds ~{row['worker_cores_per_primary']:.0f} worker cores"
        )
        print(f"     top commands per task: {row['top_commands_per_task']}")
        if "results" in row:
            apart = row["results"]
            print(
                f"     (results on their own Redis; the line above is the broker's) results Redis per task: "
                f"{apart['redis_commands_per_task']:.1f} commands, {apart['bytes_in_per_task'] / 1024:.1f} KiB in, "
                f"{apart['bytes_out_per_task'] / 1024:.1f} KiB out, {apart['redis_cpu_ms_per_task']:.3f} ms CPU"
            )
            print(f"     results' top commands per task: {apart['top_commands_per_task']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"cores": cores, "headroom": REDIS_HEADROOM, "task_events": events, "rows": rows}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()

"""Micro-batching benchmark: many one-text tasks, batched into shared encodes versus one encode each.

Starts two prefork workers as shipped (concurrency = cores, pinned, model preloaded) on their own
Redis databases, identical but for INFERENCE_MICROBATCH_MAX_TEXTS (the default, 64, versus 0 = off), and runs
them in one sitting, alternating from round to round so drift of the machine hits both alike,
on the same seeded one-sentence tasks:

- burst: 10 producers each push their share of 1,000 one-text `inference.embed` tasks at once,
  without waiting (a Rails app's after_commit hooks; raw protocol messages, as the Ruby client
  sends them, so the harness's own CPU stays small); latency is from a task's push to its
  result's `date_done` in the backend; throughput is tasks / (last done - first pushed);
- closed loop: 10 producers each wait for their task's result before sending the next;
- low load: one producer, one task at a time (the latency a lone task pays for the wait).

With `--mixed` the two workers both micro-batch and differ in INFERENCE_MICROBATCH_MAX_TOKENS
(the default, passes bounded by padded tokens, versus 0 = bounded by texts only, the batcher before
issue 30), and the tasks' texts are the mixed workload: 90 % one-line tickets, 10 % texts of 200+ words.

    .venv/bin/python -m benchmarks.microbatch            # the documented run, ~3 minutes here
    .venv/bin/python -m benchmarks.microbatch --mixed    # token-bounded vs texts-only passes
    .venv/bin/python -m benchmarks.microbatch --quick    # a smoke run of every code path
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from benchmarks.harness.alternation import alternated
from benchmarks.harness.bursts import one_text_burst
from benchmarks.harness.host import stop_cleanly_on_term
from benchmarks.harness.report import write_report
from benchmarks.harness.runner import cpu_seconds, run_threads
from benchmarks.harness.stats import latency_summary
from benchmarks.harness.workload import REPO_ROOT, make_batches
from benchmarks.token_batches import mixed_batches
from inference_tasks.config.defaults import (
    DEFAULT_MICROBATCH_MAX_TEXTS,
    DEFAULT_MICROBATCH_MAX_TOKENS,
    DEFAULT_MICROBATCH_WAIT_MS,
)
from inference_tasks.cores import available_cores
from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 600
# Each configuration's INFERENCE_* settings; the last one is the baseline the ratios divide by.
CONFIGS = {"batched": {"microbatch_max_texts": DEFAULT_MICROBATCH_MAX_TEXTS}, "unbatched": {"microbatch_max_texts": 0}}
MIXED_CONFIGS = {
    "tokens": {"microbatch_max_tokens": DEFAULT_MICROBATCH_MAX_TOKENS},
    "texts": {"microbatch_max_tokens": 0},
}


def closed_loop(worker: localstack.WorkerProcess, texts: list[str], producers: int) -> dict:
    """Each producer sends one task, waits for its result, sends the next."""
    order = itertools.count()
    latencies: list[float] = []
    errors = [0]

    def produce() -> None:
        app = localstack.producer_app(worker.redis_url)
        while (index := next(order)) < len(texts):
            began = time.perf_counter()
            try:
                app.send_task(EMBED_TASK, args=[[texts[index]]]).get(timeout=RESULT_TIMEOUT_S)
                latencies.append(time.perf_counter() - began)
            except Exception:  # noqa: BLE001 - counted
                errors[0] += 1

    began, ended = run_threads(produce, producers)
    return {"tasks": len(texts), "wall_s": ended - began, "latencies": latencies, "errors": errors[0]}


def batch_sizes(worker: localstack.WorkerProcess, children: int) -> dict:
    """Micro-batch counters summed over the worker's children (asked through worker_info)."""
    seen: dict[int, dict] = {}
    for _ in range(children * 6):
        info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=60)
        seen[info["pid"]] = info["microbatch"] | {"tasks_served": info["tasks_served"]}
        if len(seen) == children:
            break
    batches = sum(c["batches_run"] for c in seen.values())
    batched = sum(c["batched_tasks"] for c in seen.values())
    return {
        "children_seen": len(seen),
        "batches_run": batches,
        "batched_tasks": batched,
        "mean_batch": batched / batches if batches else None,
        "largest_batch": max((c["largest_batch"] for c in seen.values()), default=0),
        "tasks_served": sum(c["tasks_served"] for c in seen.values()),
    }


def worker_cpu(worker: localstack.WorkerProcess) -> tuple[float, float]:
    """CPU seconds so far of the worker's main process and of its children (no recycling in this run)."""
    main = psutil.Process(worker.process.pid)
    return cpu_seconds([main]), cpu_seconds(main.children())


def measured(worker: localstack.WorkerProcess, run: Callable[[], dict]) -> dict:
    """`run`, plus the CPU the worker's main process and children spent during it."""
    main_before, children_before = worker_cpu(worker)
    part = run()
    main_after, children_after = worker_cpu(worker)
    return part | {"main_cpu_s": main_after - main_before, "children_cpu_s": children_after - children_before}


def summary(config: str, scenario: str, parts: list[dict]) -> dict:
    latencies = [latency for part in parts for latency in part["latencies"]]
    tasks = sum(part["tasks"] for part in parts)
    wall = sum(part["wall_s"] for part in parts)
    return {
        "config": config,
        "scenario": scenario,
        "tasks": tasks,
        "errors": sum(part["errors"] for part in parts),
        "tasks_per_s": tasks / wall,
        "tasks_per_s_by_round": [part["tasks"] / part["wall_s"] for part in parts],
        **latency_summary(latencies),
        # CPU per task in the worker (main process + children), without the harness's own producers:
        # what bounds throughput on a host that only runs workers.
        "worker_cpu_ms_per_task": 1000 * sum(part["main_cpu_s"] + part["children_cpu_s"] for part in parts) / tasks,
        "main_cpu_ms_per_task": 1000 * sum(part["main_cpu_s"] for part in parts) / tasks,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="one-text tasks per burst")
    parser.add_argument("--closed-tasks", type=int, default=400, help="tasks per closed-loop run")
    parser.add_argument("--lone-tasks", type=int, default=40, help="tasks per low-load run")
    parser.add_argument("--producers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--mixed", action="store_true", help="token-bounded vs texts-only passes, mixed texts")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "microbatch.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.closed_tasks, args.lone_tasks, args.producers, args.rounds = 40, 20, 4, 3, 1
    args.configs = MIXED_CONFIGS if args.mixed else CONFIGS
    return args


def one_texts(count: int, seed: int, mixed: bool = False) -> list[str]:
    if mixed:
        return [text for batch in mixed_batches(-(-count // 64), seed) for text in batch][:count]
    return [text for [text] in make_batches(count, 1, seed)]


def start_workers(
    server: Any, work: Path, cores: int, seed: int, configs: dict[str, dict]
) -> dict[str, localstack.WorkerProcess]:  # fmt: skip
    """One worker per configuration on its own database, started together, then warmed up."""
    workers: dict[str, localstack.WorkerProcess] = {}
    for index, (name, settings) in enumerate(configs.items(), start=1):
        workers[name] = localstack.start_worker(
            name, server.url(index), work, os.environ, wait_ready=False,
            concurrency=cores, max_tasks_per_child=0, **settings,
        )  # fmt: skip
    for worker in workers.values():
        worker.wait_ready()
        closed_loop(worker, one_texts(cores * 4, seed + 1), cores)  # warm
    return workers


def run_rounds(workers: dict[str, localstack.WorkerProcess], args: argparse.Namespace) -> dict[tuple[str, str], list]:
    """Every scenario on every worker, the workers alternated round by round."""
    parts: dict[tuple[str, str], list[dict]] = {}
    texts = partial(one_texts, mixed=args.mixed)
    for round_index, name in alternated(list(workers), args.rounds):
        seed = args.seed + 100 * round_index
        worker = workers[name]
        for scenario, run in (
            ("burst", partial(one_text_burst, worker, texts(args.tasks, seed), args.producers)),
            ("closed-loop", partial(closed_loop, worker, texts(args.closed_tasks, seed + 1), args.producers)),
            ("low-load", partial(closed_loop, worker, texts(args.lone_tasks, seed + 2), 1)),
        ):
            part = measured(worker, run)
            parts.setdefault((name, scenario), []).append(part)
            rate = part["tasks"] / part["wall_s"]
            print(f"  round {round_index + 1} {name:<9} {scenario:<11} {rate:7.1f} tasks/s", flush=True)
    return parts


def print_results(rows: list[dict], sizes: dict[str, dict], args: argparse.Namespace, cores: int) -> None:
    base = list(args.configs)[-1]
    texts = "mixed texts (10 % of 200+ words)" if args.mixed else "tickets"
    print(f"\nOne-text embed tasks of {texts}, {args.producers} producers, {cores} children, {args.rounds} rounds")
    print(
        "scenario     config       tasks/s  mean ms   p50 ms   p95 ms  x thrpt  x p95"
        f"  (x: vs {base})  worker CPU ms/task (main)"
    )
    for scenario in ("burst", "closed-loop", "low-load"):
        for row in (r for r in rows if r["scenario"] == scenario):
            print(
                f"{scenario:<12} {row['config']:<10} {row['tasks_per_s']:9.1f} {row['latency_mean_s'] * 1000:8.0f} "
                f"{row['latency_p50_s'] * 1000:8.0f} {row['latency_p95_s'] * 1000:8.0f} "
                f"{row['throughput_vs_base']:8.2f} {row['p95_vs_base']:6.2f}"
                f"  {row['worker_cpu_ms_per_task']:8.1f} ({row['main_cpu_ms_per_task']:.1f})"
                + (f"  ERRORS {row['errors']}" if row["errors"] else "")
            )
    batched = sizes.get(next(iter(args.configs)), {})
    print(
        f"\nbatched worker: {batched.get('batches_run')} batch jobs, {batched.get('batched_tasks')} tasks in them, "
        f"mean {batched.get('mean_batch') or 0:.1f}, largest {batched.get('largest_batch')} "
        f"(of {batched.get('tasks_served')} tasks served; the rest ran alone)"
    )


def main() -> None:
    args = parse_args()
    stop_cleanly_on_term()
    cores = available_cores()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-microbatch-"))
    server = localstack.start_redis(work / "redis")
    workers: dict[str, localstack.WorkerProcess] = {}
    try:
        workers = start_workers(server, work, cores, args.seed, args.configs)
        print(f"{len(workers)} workers up and warm in {time.perf_counter() - started:.0f} s on {cores} cores")
        parts = run_rounds(workers, args)
        sizes = {name: batch_sizes(worker, cores) for name, worker in workers.items()}
    finally:
        for worker in workers.values():
            worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    rows = [summary(name, scenario, runs) for (name, scenario), runs in parts.items()]
    for row in rows:
        base = next(r for r in rows if r["config"] == list(args.configs)[-1] and r["scenario"] == row["scenario"])
        row["throughput_vs_base"] = row["tasks_per_s"] / base["tasks_per_s"]
        row["p95_vs_base"] = row["latency_p95_s"] / base["latency_p95_s"]
    print_results(rows, sizes, args, cores)
    total_s = time.perf_counter() - started
    print(f"total {total_s:.0f} s")
    write_report(args.out, "microbatch", {
        "cores": cores, "producers": args.producers, "rounds": args.rounds, "mixed": args.mixed,
        "configs": args.configs, "microbatch_max_texts": DEFAULT_MICROBATCH_MAX_TEXTS,
        "microbatch_wait_ms": DEFAULT_MICROBATCH_WAIT_MS,
        "total_s": total_s, "results": rows, "batch_sizes": sizes,
    })  # fmt: skip
    if any(row["errors"] for row in rows):
        raise SystemExit("some tasks failed")


if __name__ == "__main__":
    main()

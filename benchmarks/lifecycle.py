"""Worker lifecycle benchmark: what a child costs to start and recycle, preloaded versus loaded in the child.

Starts one redis-server and prefork workers (concurrency = cores) in both model modes
(INFERENCE_PRELOAD_MODEL=true, the default, and false) at worker_max_tasks_per_child 3, 50 and
unlimited, plus 3 without jitter, and drives each with the same closed-loop load, alternating
configurations; micro-batching is off, so every request is one job towards the recycle limit.
From the workers' own log lines ("child ready N s after fork", task successes) it reports per
configuration: throughput and its loss against unlimited in the same mode, how many children
recycled, fork-to-ready and fork-to-first-task times, and how many recycles fell in the same
second as another; then RSS, PSS and USS per child and for the whole worker.

    .venv/bin/python -m benchmarks.lifecycle                # ~6 minutes here
    .venv/bin/python -m benchmarks.lifecycle --quick        # smoke size
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from benchmarks.harness.alternation import alternated
from benchmarks.harness.host import stop_cleanly_on_term
from benchmarks.harness.report import write_report
from benchmarks.harness.runner import run_threads
from benchmarks.harness.workload import REPO_ROOT, make_batches
from inference_tasks.cores import available_cores
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 600
LINE = re.compile(r"^\[(?P<ts>[\d-]+ [\d:,]+): \w+/(?P<proc>ForkPoolWorker-\d+)\] (?P<msg>.*)$")
READY = re.compile(r"child ready (?P<after>[\d.]+) s after fork \(model (?P<mode>[\w-]+), load (?P<load>[\d.]+) s")
SUCCEEDED = re.compile(r"Task [\w.]+\[[0-9a-f-]+\] succeeded in (?P<runtime>[\d.e-]+)s")


def log_events(log: str, since: float, until: float) -> dict[str, dict]:
    """Per child process name: fork time, ready time, load seconds, first task start, within [since, until]."""
    children: dict[str, dict] = {}
    for line in log.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        at = datetime.strptime(match["ts"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        child = children.setdefault(match["proc"], {})
        if ready := READY.search(match["msg"]):
            child.update(ready_at=at, forked_at=at - float(ready["after"]), ready_s=float(ready["after"]))
            child["load_s"] = float(ready["load"])
        elif (done := SUCCEEDED.search(match["msg"])) and "first_task_at" not in child:
            child["first_task_at"] = at - float(done["runtime"])
    return {name: c for name, c in children.items() if "forked_at" in c and since <= c["forked_at"] <= until}


def recycle_gaps(log: str, since: float, until: float) -> list[float]:
    """Seconds a pool slot served nothing per recycle within [since, until], read from the log.

    For each child forked in the window: from the last task end of the child it replaced (the
    latest-ending child that served nothing after the fork) to the new child's first task
    start. Under sustained load that idle time is what a recycle costs; unlike the throughput
    difference between configurations, it does not move with the host's drift between rounds.
    """
    last_end: dict[str, float] = {}
    for line in log.splitlines():
        match = LINE.match(line)
        if match and SUCCEEDED.search(match["msg"]):
            last_end[match["proc"]] = datetime.strptime(match["ts"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    children = log_events(log, since, until)
    gaps: list[float] = []
    replaced: set[str] = set()
    for name, child in sorted(children.items(), key=lambda item: item[1]["forked_at"]):
        if "first_task_at" not in child or child["first_task_at"] > until:
            continue
        before = [
            (end, other)
            for other, end in last_end.items()
            if other != name and other not in replaced and since <= end <= child["forked_at"]
        ]
        if before:
            end, other = max(before)
            replaced.add(other)
            gaps.append(child["first_task_at"] - end)
    return gaps


def drive(worker: localstack.WorkerProcess, batches: list[list[str]], producers: int) -> tuple[float, float, float]:
    """Closed-loop producers send every batch once; (start, end) wall-clock times and failures."""
    order = itertools.count()
    failures = [0]

    def produce() -> None:
        app = localstack.producer_app(worker.redis_url)
        while (index := next(order)) < len(batches):
            result = app.send_task(EMBED_TASK, args=[batches[index]])
            try:
                if len(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) != len(batches[index]):
                    failures[0] += 1
            except Exception:  # noqa: BLE001 - counted; a lost or failed task is a finding, not a crash
                failures[0] += 1

    started, ended = run_threads(produce, producers)
    return started, ended, failures[0]


def memory(worker: localstack.WorkerProcess) -> dict:
    """RSS, PSS and USS of each child and of the whole worker (main process included), MiB."""
    parent = psutil.Process(worker.process.pid)
    children = parent.children()
    rows = [child.memory_full_info() for child in children]
    whole = [*rows, parent.memory_full_info()]
    mib = 2**20
    return {
        "children": len(children),
        "child_rss_mib": statistics.fmean(r.rss for r in rows) / mib,
        "child_pss_mib": statistics.fmean(r.pss for r in rows) / mib,
        "child_uss_mib": statistics.fmean(r.uss for r in rows) / mib,
        "worker_rss_mib": sum(r.rss for r in whole) / mib,
        "worker_pss_mib": sum(r.pss for r in whole) / mib,
        "worker_uss_mib": sum(r.uss for r in whole) / mib,
    }


def same_second_share(fork_times: list[float]) -> tuple[int, float]:
    """Most recycles whose forks fall in one 1-second window, and the share with a neighbour within 1 s."""
    times = sorted(fork_times)
    if not times:
        return 0, 0.0
    most = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    close = sum(1 for i, t in enumerate(times) if any(abs(t - u) < 1.0 for j, u in enumerate(times) if j != i))
    return most, close / len(times)


def whole_pool_restarts(fork_times: list[float], children: int) -> int:
    """How many times every child of the pool was replaced within one second (nothing serving)."""
    times = sorted(fork_times)
    count, index = 0, 0
    while index < len(times):
        window = [t for t in times[index:] if t < times[index] + 1.0]
        if len(window) >= children:
            count += 1
            index += len(window)
        else:
            index += 1
    return count


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=240, help="requests per configuration, over all rounds")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--batch", type=int, default=32, help="sentences per request")
    parser.add_argument("--producers", type=int, default=10)
    parser.add_argument("--limits", default="3,50,0", help="worker_max_tasks_per_child values (0 = never)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "lifecycle.json")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.batch, args.producers, args.limits, args.rounds = 12, 4, 3, "3,0", 1
    return args


# A configuration: its name, whether the model is preloaded, its task limit, its jitter (None: default).
Config = tuple[str, bool, int, float | None]


def configurations(limits: list[int]) -> list[Config]:
    configs: list[Config] = []
    for limit in limits:
        for preload in (True, False):
            configs.append((f"{'preloaded' if preload else 'in-child'}-{limit or 'unlimited'}", preload, limit, None))
    if 50 in limits:  # the control for jitter: Celery's fixed limit, every child alike
        configs.append(("preloaded-50-no-jitter", True, 50, 0.0))
    return configs


def start_workers(configs: list[Config], server: Any, work: Path, cores: int) -> dict[str, localstack.WorkerProcess]:
    databases = itertools.count(1)
    workers: dict[str, localstack.WorkerProcess] = {}
    for name, preload, limit, jitter in configs:
        # Micro-batching off: a batch is one job towards the recycle limit, so with it on the
        # number of recycles would depend on how many requests happened to coincide.
        options: dict[str, object] = {
            "concurrency": cores,
            "preload_model": str(preload).lower(),
            "microbatch_max_texts": 0,
            "max_tasks_per_child": limit,
        }
        if jitter is not None:
            options["max_tasks_per_child_jitter"] = jitter
        workers[name] = localstack.start_worker(
            name, server.url(next(databases)), work, os.environ, wait_ready=False, **options
        )
    for worker in workers.values():
        worker.wait_ready()
    return workers


def drive_rounds(
    workers: dict[str, localstack.WorkerProcess], per_round: list[list[list[str]]], producers: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, int]]:
    """Each round's requests through every worker, alternated; each worker's (start, end) spans and failures."""
    spans: dict[str, list[tuple[float, float]]] = {name: [] for name in workers}
    failures: dict[str, int] = dict.fromkeys(workers, 0)
    for round_index, name in alternated(list(workers), len(per_round)):
        round_batches = per_round[round_index]
        begin, end, failed = drive(workers[name], round_batches, producers)
        spans[name].append((begin, end))
        failures[name] += failed
        print(f"  {name}: {len(round_batches) / (end - begin):.2f} req/s", flush=True)
    return spans, failures


def recycling_row(
    config: Config, log: str, spans: list[tuple[float, float]], per_round: list[list[list[str]]], cores: int
) -> dict:
    """What recycling cost one configuration, from its spans and its worker's log."""
    name, preload, limit, jitter = config
    requests = sum(len(batches) for batches in per_round)
    wall = sum(end - begin for begin, end in spans)
    children: dict[str, dict] = {}
    gaps: list[float] = []
    for begin, end in spans:
        children.update(log_events(log, begin, end))
        gaps += recycle_gaps(log, begin, end)
    ready = [c["ready_s"] for c in children.values()]
    first = [c["first_task_at"] - c["forked_at"] for c in children.values() if "first_task_at" in c]
    forks = [c["forked_at"] for c in children.values()]
    most, share = same_second_share(forks)
    return {
        "config": name,
        "preload": preload,
        "max_tasks_per_child": limit or None,
        "jitter": 0.25 if jitter is None else jitter,
        "requests": requests,
        "rounds": len(per_round),
        "wall_s": wall,
        "requests_per_s": requests / wall,
        "requests_per_s_by_round": [len(b) / (end - begin) for b, (begin, end) in zip(per_round, spans, strict=True)],
        "recycles": len(children),
        "idle_s_per_recycle": statistics.fmean(gaps) if gaps else None,
        # The share of pool capacity recycles left idle: the loss they cause, from the logs.
        "idle_slot_share": sum(gaps) / (cores * wall),
        "fork_to_ready_mean_s": statistics.fmean(ready) if ready else None,
        "fork_to_ready_max_s": max(ready) if ready else None,
        "fork_to_first_task_mean_s": statistics.fmean(first) if first else None,
        "most_recycles_in_one_second": most,
        "whole_pool_restarts": whole_pool_restarts(forks, cores),
        "share_recycled_within_1s_of_another": share,
    }


def add_losses(rows: list[dict]) -> None:
    """Each row's throughput loss, and seconds lost per recycle, against its mode without recycling."""
    for row in rows:
        mode = "preloaded" if row["preload"] else "in-child"
        unlimited = next((r for r in rows if r["config"] == f"{mode}-unlimited"), None)
        if unlimited:
            row["loss_vs_unlimited"] = 1 - row["requests_per_s"] / unlimited["requests_per_s"]
            extra = row["wall_s"] - unlimited["wall_s"]
            row["lost_s_per_recycle"] = extra / row["recycles"] if row["recycles"] else None


def _fmt(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def print_tables(rows: list[dict], memory_rows: dict[str, dict], args: argparse.Namespace, cores: int) -> None:
    print(f"\nRecycling under load ({args.producers} producers, {args.batch} sentences per request, {cores} children)")
    print(
        "config                     req/s   loss  recycles  fork->ready mean/max  fork->1st task  pool  within 1s"
        "  idle/recycle  idle share"
    )
    for row in rows:
        print(
            f"{row['config']:<25} {row['requests_per_s']:6.2f} {_fmt(row.get('loss_vs_unlimited'), '6.1%')} "
            f"{row['recycles']:>9} {_fmt(row['fork_to_ready_mean_s'], '9.2f')} / "
            f"{_fmt(row['fork_to_ready_max_s'], '5.2f')}"
            f"   {_fmt(row['fork_to_first_task_mean_s'], '12.2f')} {row['whole_pool_restarts']:>5} "
            f"{row['share_recycled_within_1s_of_another']:>9.0%}"
            f"  {_fmt(row['idle_s_per_recycle'], '10.2f')} s {row['idle_slot_share']:>10.1%}"
            + (f"  FAILURES {row['failures']}" if row["failures"] else "")
        )
    print("\nMemory, warm and idle (MiB): child RSS / PSS / USS (mean), whole worker RSS / PSS / USS")
    for name, mem in memory_rows.items():
        print(
            f"{name:<25} {mem['child_rss_mib']:6.0f} / {mem['child_pss_mib']:5.0f} / {mem['child_uss_mib']:5.0f}"
            f"    {mem['worker_rss_mib']:6.0f} / {mem['worker_pss_mib']:5.0f} / {mem['worker_uss_mib']:5.0f}"
        )


def main() -> None:
    args = parse_args()
    stop_cleanly_on_term()
    cores = available_cores()
    configs = configurations([int(limit) for limit in args.limits.split(",")])
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    server = localstack.start_redis(work / "redis")
    workers: dict[str, localstack.WorkerProcess] = {}
    rows: list[dict] = []
    memory_rows: dict[str, dict] = {}
    try:
        workers = start_workers(configs, server, work, cores)
        warm = make_batches(cores * 2, args.batch, args.seed + 1)
        for worker in workers.values():
            drive(worker, warm, cores)
        print(f"{len(workers)} workers up and warm in {time.perf_counter() - started:.0f} s on {cores} cores")
        idle = ("preloaded-unlimited", "in-child-unlimited")  # idle, warm, before any load
        memory_rows.update({name: memory(workers[name]) for name in idle if name in workers})
        batches = make_batches(args.requests, args.batch, args.seed)
        per_round = [batches[i :: args.rounds] for i in range(args.rounds)]
        spans, failures = drive_rounds(workers, per_round, args.producers)
        for config in configs:
            name = config[0]
            rows.append(recycling_row(config, workers[name].log(), spans[name], per_round, cores))
            rows[-1]["failures"] = failures[name]
    finally:
        for worker in workers.values():
            worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    add_losses(rows)
    print_tables(rows, memory_rows, args, cores)
    total_s = time.perf_counter() - started
    print(f"\ntotal {total_s:.0f} s")
    write_report(args.out, "lifecycle", {
        "cores": cores, "producers": args.producers, "batch_sentences": args.batch, "total_s": total_s,
        "recycling": rows, "memory": memory_rows,
    })  # fmt: skip
    if any(row["failures"] for row in rows):
        raise SystemExit("some requests failed")


if __name__ == "__main__":
    main()

"""The GPU check's sections (benchmarks/gpu_check.py): one served configuration's figures, the
incident's oversubscription case, and children recycled under load. Each starts real workers on the
check's redis-server (a database each) and stops them before it returns."""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import gpu
from benchmarks.harness.bursts import one_text_burst
from benchmarks.harness.report import add_ratios, print_table
from benchmarks.harness.runner import combine, run
from benchmarks.harness.stats import percentile
from benchmarks.harness.targets import CeleryTarget, HttpTarget, Target
from benchmarks.harness.workload import make_batches, ticket_texts
from benchmarks.lifecycle import drive, log_events, recycle_gaps
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack
from tests.support.control import worker_report

BATCH = 64
RESULT_TIMEOUT_S = 300
BURST_PRODUCERS = 4


@dataclass
class Check:
    """What every section shares: the arguments, the Redis, a work folder, the CPU reference vectors."""

    args: argparse.Namespace
    server: localstack.RedisServer
    work: Path
    reference: dict[str, Any] | None
    databases: Any = field(default_factory=lambda: itertools.count(1))

    def url(self) -> str:
        return self.server.url(next(self.databases))


def celery(check: Check, label: str, device: str, children: int, **settings: object) -> CeleryTarget:
    """A pinned worker of `children` on `device` serving the check's model, started and ready."""
    model = check.args.model
    target = CeleryTarget(label, check.url(), check.work, children, True, device=device, model=model, **settings)
    target.wait_ready()
    return target


def serve(check: Check, label: str, device: str, children: int, dtype: str = "float32") -> dict[str, Any]:
    """64-text batches, then a one-text burst, through one worker; its children's devices and memory."""
    settings = {"cuda_dtype": dtype} if device != "cpu" and dtype != "float32" else {}
    started = time.perf_counter()
    target = celery(check, label, device, children, **settings)
    ready_s = time.perf_counter() - started
    try:
        run(target, make_batches(children * 2, BATCH, seed=check.args.seed + 1), children * 2, None)  # all warm
        batches = make_batches(check.args.batches, BATCH, seed=check.args.seed)
        row = combine([run(target, batches, children * 2 + 2, None)])
        texts = list(itertools.islice(itertools.cycle(ticket_texts()), check.args.one_text))
        burst = one_text_burst(target.worker, texts, BURST_PRODUCERS)
        report = worker_report(target.worker.app)
        driver = gpu.memory_by_pid() or {}
        min_cosine = served_min_cosine(target, check.reference)
    finally:
        target.stop()
    latencies = burst["latencies"]
    config = {
        "label": label, "device": device, "children_count": children, "dtype": dtype, "ready_s": round(ready_s, 2),
        "batches": {
            "tasks": row["requests"], "sentences_per_s": row["sentences_per_s"],
            "p50_ms": row["latency_p50_s"] * 1000, "p95_ms": row["latency_p95_s"] * 1000, "errors": row["errors"],
        },
        "one_text": {
            "tasks": burst["tasks"], "tasks_per_s": burst["tasks"] / burst["wall_s"], "errors": burst["errors"],
            "p50_ms": percentile(latencies, 0.5) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000,
        },
        "children": [
            {**{key: child.get(key) for key in ("slot", "pid", "device", "gpu_memory_mib", "precision")},
             "driver_mib": driver.get(child.get("pid", -1))}
            for child in report["children"]
        ],
        "main_process_cuda_initialized": report["main"]["cuda_initialized"],
        "main_process_driver_mib": driver.get(target.worker.process.pid),
        "mps_active": report["mps_active"],
        "min_cosine": min_cosine,
    }  # fmt: skip
    print(f"{label}: {json_line(config)}", flush=True)
    return config


def served_min_cosine(target: CeleryTarget, reference: dict[str, Any] | None) -> float | None:
    """The smallest cosine between what `target` serves for the reference texts and their CPU float32 vectors."""
    if reference is None:
        return None
    app = localstack.producer_app(target.worker.redis_url)
    served = app.send_task(EMBED_TASK, args=[reference["texts"]]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]
    ours, theirs = np.asarray(served, dtype=np.float64), np.asarray(reference["vectors"], dtype=np.float64)
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return round(float(np.min(np.sum(ours * theirs, axis=1))), 6)


def oversubscription(check: Check) -> list[dict[str, Any]]:
    """The incident's case on this host's cores: concurrent 64-text requests, each configuration alike."""
    args = check.args
    cores = args.cpu_children
    targets: dict[str, Target] = {
        "http-default": HttpTarget("http-default", None, check.work),
        "http-pinned": HttpTarget("http-pinned", 1, check.work),
        "celery": CeleryTarget("celery", check.url(), check.work, cores, True, model=args.model),
        "celery-unpinned": CeleryTarget(
            "celery-unpinned", check.url(), check.work, cores, False, None, model=args.model
        ),
    }
    rows = []
    try:
        for target in targets.values():
            target.wait_ready()
            run(target, make_batches(cores, BATCH, seed=args.seed + 1), min(cores, args.oversub_producers), None)
        batches = make_batches(args.oversub_requests, BATCH, args.seed)
        for name, target in targets.items():
            rows.append(combine([run(target, batches, args.oversub_producers, None)]))
            print(f"  {name}: {rows[-1]['requests_per_s']:.2f} req/s", flush=True)
    finally:
        for target in targets.values():
            target.stop()
    add_ratios(rows)
    print_table(f"Oversubscription: {args.oversub_producers} concurrent requests on {cores} cores", rows)
    return [{key: value for key, value in row.items() if key != "latencies"} for row in rows]


def recycle(check: Check, device: str) -> dict[str, Any]:
    """Children recycled under load every `--recycle-after` tasks: fork to ready and to first task."""
    args = check.args
    options = {"max_tasks_per_child": args.recycle_after, "max_tasks_per_child_jitter": 0.0, "microbatch_max_texts": 0}
    target = celery(check, f"{device}-recycle", device, 2, **options)
    try:
        run(target, make_batches(4, BATCH, seed=args.seed + 1), 2, None)
        since = time.time()
        started, ended, failures = drive(target.worker, make_batches(args.recycle_batches, BATCH, args.seed), 4)
        log = target.worker.log()
    finally:
        target.stop()
    children = log_events(log, since, ended).values()
    ready = [child["ready_s"] for child in children]
    first = [child["first_task_at"] - child["forked_at"] for child in children if "first_task_at" in child]
    gaps = recycle_gaps(log, since, ended)
    result = {
        "device": device, "tasks": args.recycle_batches, "max_tasks_per_child": args.recycle_after,
        "failures": failures, "recycled_children": len(ready),
        "tasks_per_s": args.recycle_batches / (ended - started), "fork_to_ready_s": summary(ready),
        "fork_to_first_task_s": summary(first), "slot_idle_per_recycle_s": summary(gaps),
    }  # fmt: skip
    print(f"recycle: {json_line(result)}", flush=True)
    return result


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"mean": round(statistics.fmean(values), 3), "max": round(max(values), 3), "count": len(values)}


def json_line(values: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items() if key not in ("children", "label"))

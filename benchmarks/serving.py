"""Serving benchmark: the HTTP hop this project replaces versus our Celery workers, side by side.

Starts every configuration once (redis-server, two FastAPI/Uvicorn services, Celery workers, a
process pool), then runs them in one sitting, alternating configurations at each load level so
drift of this shared machine hits all alike, on the same seeded 64-sentence batches:

- http-default: FastAPI + Uvicorn, sync /embed, the libraries' default threading;
- http-pinned: the same service with every native pool at 1 thread;
- celery-unpinned: our prefork worker with INFERENCE_PIN_THREADS=false (the oversubscribed control);
- celery: our prefork worker as shipped (concurrency = cores, pinned, model preloaded);
- celery-adaptive: the same with INFERENCE_ADAPTIVE_THREADS=true (idle siblings' cores lent);
- ceiling: cores x 1-thread processes calling encode directly, no transport at all;
- celery-openvino / ceiling-openvino: the same two with INFERENCE_BACKEND=openvino (the model
  exported once at the start), and celery-int8 / ceiling-int8 serving its int8 export
  (INFERENCE_OPENVINO_PRECISION=int8), compared with torch in their own alternated section (64-text
  batches, the mixed workload, single sentences), plus one-text tasks micro-batched by the OpenVINO
  worker, per-child memory and fork-to-ready times.

Closed-loop producers (each waits for its answer, then sends the next) at each level; then the
oversubscription runs (per-request native threads forced to what default threading gives on
bigger hosts) and single-producer latency. Prints tables and the ratios; writes JSON.

    .venv/bin/python -m benchmarks.serving                 # the documented run, ~8 minutes here
    .venv/bin/python -m benchmarks.serving --quick         # a smoke run of every code path
    .venv/bin/python -m benchmarks.serving --runtimes-only # torch vs OpenVINO auto vs int8 only (~6 minutes)
    .venv/bin/python -m benchmarks.serving --runtimes-only --worker-cpus 1

`--worker-cpus` confines what serves (Celery workers, main process and children; the ceiling's
processes; the HTTP servers) to those CPUs and puts this harness, its producers and redis-server
on the others, as production puts producers and Redis on other hosts. On a small machine that is
the only way to see what the serving stack itself delivers per core: with everything on the
same cores, the producers' and Redis' CPU (which the ceiling does not pay) is charged to Celery.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from benchmarks import runtimes
from benchmarks.harness.alternation import alternated
from benchmarks.harness.host import on_cpus, parse_cpus, stop_cleanly_on_term
from benchmarks.harness.report import add_ratios, print_table, write_report
from benchmarks.harness.runner import combine, run
from benchmarks.harness.targets import PEER_VENV, CeilingTarget, CeleryTarget, HttpTarget, InfinityTarget, Target
from benchmarks.harness.workload import REPO_ROOT, make_batches
from inference_tasks.config import Settings
from inference_tasks.cores import available_cores
from inference_tasks.worker.runtimes.openvino.export import export_openvino, export_openvino_int8
from tests.support import localstack

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "serving.json"
MAIN_CONFIGS = ["http-default", "http-pinned", "celery-unpinned", "celery", "ceiling"]


def parse_args(
    description: str | None = None, extend: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """This script's options; `extend` adds a calling script's own (benchmarks/runtimes_report.py)."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    if extend is not None:
        extend(parser)
    parser.add_argument("--levels", default="10,20,40", help="concurrent producers for the main comparison")
    parser.add_argument("--requests", type=int, default=32, help="requests per run below 40 producers")
    parser.add_argument("--requests-40", type=int, default=48, help="requests per run at 40 producers or more")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds at the first level")
    parser.add_argument("--batch", type=int, default=64, help="sentences per request")
    parser.add_argument("--oversub", default="8,16,24", help="forced per-request threads ('' to skip)")
    parser.add_argument("--oversub-requests", type=int, default=16, help="requests per oversubscription run")
    parser.add_argument("--low-load-requests", type=int, default=6, help="sequential requests, one producer")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke size: every path, a few tiny requests")
    parser.add_argument("--runtimes-only", action="store_true", help="only the torch vs OpenVINO (auto, int8) section")
    parser.add_argument("--runtime-rounds", type=int, default=3, help="alternated rounds of the runtime section")
    parser.add_argument(
        "--runtime-requests", type=int, default=64, help="requests per run in the runtime section (~4 s each)"
    )
    parser.add_argument("--one-text-tasks", type=int, default=4096, help="one-text tasks in the burst")
    parser.add_argument(
        "--runtime-encoding", default="f32-base64", help="result encoding in the runtime section ('' for JSON)"
    )
    parser.add_argument(
        "--worker-cpus", default="", help="CPUs for what serves, e.g. '1' (the harness and Redis get the rest)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.quick:
        args.levels, args.requests, args.requests_40, args.batch = "2", 4, 4, 4
        args.oversub, args.oversub_requests, args.low_load_requests = "3", 2, 2
        args.runtime_rounds, args.runtime_requests, args.one_text_tasks = 1, 4, 16
    return args


def confine(args: argparse.Namespace) -> tuple[int, frozenset[int]]:
    """With --worker-cpus: this harness (and what it starts later: redis-server) on the other CPUs.
    Returns the cores that serve and the CPU set for servers (empty: everything shares every CPU)."""
    cores = available_cores()
    worker_cpus = parse_cpus(args.worker_cpus)
    if worker_cpus:
        harness_cpus = os.sched_getaffinity(0) - worker_cpus
        if not harness_cpus or not worker_cpus <= os.sched_getaffinity(0):
            sys.exit(f"--worker-cpus {args.worker_cpus}: must leave this harness at least one of its CPUs")
        os.sched_setaffinity(0, harness_cpus)  # this thread, redis-server and every later thread here
        cores = len(worker_cpus)
        print(f"serving on CPUs {sorted(worker_cpus)}; harness and Redis on {sorted(harness_cpus)}", flush=True)
    return cores, worker_cpus


def start_targets(
    args: argparse.Namespace, server: Any, work: Path, cores: int, worker_cpus: frozenset[int], oversub: list[int]
) -> dict[str, Target]:
    """Every configuration, started together (their imports overlap), then waited for."""
    place = partial(on_cpus, worker_cpus)
    databases = itertools.count(1)
    targets: dict[str, Target] = {}
    cache = work / "models"
    export = export_openvino(Settings(model_cache=str(cache)))
    int8 = export_openvino_int8(Settings(model_cache=str(cache)))
    print(f"OpenVINO export in {export.seconds:.1f} s, int8 in {int8.seconds:.1f} s", flush=True)
    targets["celery"] = place(CeleryTarget, "celery", server.url(next(databases)), work, cores, True)
    targets["celery-openvino"] = place(
        CeleryTarget, "celery-openvino", server.url(next(databases)), work, cores, True,
        backend="openvino", model_cache=cache,
    )  # fmt: skip
    targets["celery-int8"] = place(
        CeleryTarget, "celery-int8", server.url(next(databases)), work, cores, True,
        backend="openvino", model_cache=cache, openvino_precision="int8",
    )  # fmt: skip
    targets["ceiling"] = CeilingTarget("ceiling", cores, cpus=worker_cpus)
    targets["ceiling-openvino"] = CeilingTarget("ceiling-openvino", cores, "openvino", cache, cpus=worker_cpus)
    targets["ceiling-int8"] = CeilingTarget(
        "ceiling-int8", cores, "openvino", cache, cpus=worker_cpus, precision="int8"
    )
    if (PEER_VENV / "bin" / "infinity_emb").exists():
        targets["infinity"] = place(InfinityTarget, "infinity", PEER_VENV, work)
    else:
        print(f"no Infinity peer ({PEER_VENV}): run benchmarks/peers/setup_infinity.sh to compare", flush=True)
    if not args.runtimes_only:
        place(start_http_and_torch_variants, targets, server, databases, work, cores, oversub)
    for target in targets.values():
        target.wait_ready()
    return targets


def start_http_and_torch_variants(
    targets: dict[str, Target], server: Any, databases: Any, work: Path, cores: int, oversub: list[int]
) -> None:
    """Everything of the main comparison besides celery and ceiling (started at once: imports overlap)."""
    targets["http-default"] = HttpTarget("http-default", None, work)
    targets["http-pinned"] = HttpTarget("http-pinned", 1, work)
    targets["celery-unpinned"] = CeleryTarget("celery-unpinned", server.url(next(databases)), work, cores, False, None)
    targets["celery-adaptive"] = CeleryTarget(
        "celery-adaptive", server.url(next(databases)), work, cores, True, adaptive=True
    )
    for threads in oversub:
        name = f"http-default-{threads}t"
        targets[name] = HttpTarget(name, threads, work)
        name = f"celery-unpinned-{threads}t"
        targets[name] = CeleryTarget(name, server.url(next(databases)), work, cores, False, threads)


def main() -> None:
    args = parse_args()
    stop_cleanly_on_term()
    levels = [int(level) for level in args.levels.split(",")]
    oversub = [] if args.runtimes_only else [int(t) for t in args.oversub.split(",") if t.strip()]
    cores, worker_cpus = confine(args)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    server = localstack.start_redis(work / "redis")
    redis_process = psutil.Process(server.process.pid)
    targets: dict[str, Target] = {}
    rows: dict[str, list[dict]] = {"main": [], "oversubscription": [], "low_load": []}
    runtime: dict = {}
    try:
        targets = start_targets(args, server, work, cores, worker_cpus, oversub)
        warm = make_batches(cores * 2, args.batch, seed=args.seed + 1)
        for target in targets.values():  # every child loaded and warm before anything is timed
            run(target, warm, cores * 2, None)
        startup_s = time.perf_counter() - started
        print(f"{len(targets)} configurations up and warm in {startup_s:.0f} s on {cores} cores", flush=True)
        runtime = runtimes.runtimes_section(targets, args, levels[0], redis_process)
        if not args.runtimes_only:
            rows["main"] = main_comparison(targets, args, levels, redis_process)
            rows["oversubscription"] = oversubscription(targets, args, levels[0], oversub, redis_process)
            rows["low_load"] = low_load(targets, args, redis_process)
    finally:
        stop_all(targets, server)
    report(args, rows, runtime, levels[0], cores, worker_cpus, startup_s, time.perf_counter() - started)


def stop_all(targets: dict[str, Target], server: Any) -> None:
    for target in targets.values():
        try:
            target.stop()
        except Exception as exc:  # noqa: BLE001 - keep stopping the others
            print(f"stopping {target.name}: {exc}", file=sys.stderr)
    server.process.terminate()
    server.process.wait(timeout=10)


def report(
    args: argparse.Namespace, rows: dict[str, list[dict]], runtime: dict, level: int, cores: int,
    worker_cpus: frozenset[int], startup_s: float, total_s: float,
) -> None:  # fmt: skip
    """Print the targets and ratios, write the JSON report; exit non-zero if any request failed."""
    summary = summarise(rows["main"], rows["oversubscription"], rows["low_load"], level)
    summary["lines"] += runtime.get("lines", [])
    summary["figures"].update(runtime.get("figures", {}))
    print("\nTargets and ratios (same run):")
    for line in summary["lines"]:
        print(f"  {line}")
    print(f"\ntotal {total_s:.0f} s")
    every_row = [*rows["main"], *rows["oversubscription"], *rows["low_load"], *runtime.get("rows", [])]
    errors = sum(len(row["errors"]) if isinstance(row["errors"], list) else row["errors"] for row in every_row)
    errors += runtime.get("one_text", {}).get("errors", 0)
    out = args.out
    if args.runtimes_only and args.out == DEFAULT_OUT:
        out = DEFAULT_OUT.with_name("runtimes-worker-cpus.json" if worker_cpus else "runtimes.json")
    write_report(out, "serving", {
        "cores": cores, "worker_cpus": sorted(worker_cpus), "batch_sentences": args.batch, "seed": args.seed,
        "startup_s": startup_s, "total_s": total_s, "errors": errors, **rows, "runtimes": runtime,
        "summary": summary,
    })  # fmt: skip
    if errors:
        sys.exit(f"{errors} requests failed")


def main_comparison(
    targets: dict[str, Target], args: argparse.Namespace, levels: list[int], redis_process: Any
) -> list[dict]:
    """HTTP vs Celery vs ceiling (torch) at each producer count, alternated."""
    MAIN_CONFIGS = ["http-default", "http-pinned", "celery-unpinned", "celery", "ceiling"]
    main_rows = []
    for shift, level in enumerate(levels):
        count = args.requests_40 if level >= 40 else args.requests
        batches = make_batches(count, args.batch, args.seed)
        # The adaptive-threads experiment only where it matters: the first level and low load.
        configs = MAIN_CONFIGS + (["celery-adaptive"] if shift == 0 else [])
        rounds = args.rounds if shift == 0 else 1
        parts: dict[str, list[dict]] = {name: [] for name in configs}
        for _, name in alternated(configs, rounds, shift):
            redis = redis_process if name.startswith("celery") else None
            parts[name].append(run(targets[name], batches, level, redis))
            rate = parts[name][-1]["requests"] / parts[name][-1]["wall_s"]
            print(f"  {name} at {level} producers: {rate:.2f} req/s", flush=True)
        main_rows += [combine(parts[name]) for name in configs]
    add_ratios(main_rows)
    order = [*MAIN_CONFIGS, "celery-adaptive"]
    main_rows.sort(key=lambda row: (row["producers"], order.index(row["config"])))
    print_table(f"Main comparison ({args.batch} sentences per request)", main_rows)
    return main_rows


def oversubscription(
    targets: dict[str, Target], args: argparse.Namespace, level: int, oversub: list[int], redis_process: Any
) -> list[dict]:
    """Per-request native threads forced to what default threading gives on bigger hosts."""
    oversub_rows = []
    if oversub:
        batches = make_batches(args.oversub_requests, args.batch, args.seed)
        names = ["http-default", "celery", "http-pinned", "celery-unpinned"]
        names += [f"{kind}-{t}t" for t in oversub for kind in ("http-default", "celery-unpinned")]
        for name in names:
            redis = redis_process if name.startswith("celery") else None
            oversub_rows.append(combine([run(targets[name], batches, level, redis)]))
            print(f"  {name} at {level} producers: {oversub_rows[-1]['requests_per_s']:.2f} req/s", flush=True)
        add_ratios(oversub_rows)
        print_table(f"Oversubscription: forced per-request threads, {level} producers", oversub_rows)
    return oversub_rows


def low_load(targets: dict[str, Target], args: argparse.Namespace, redis_process: Any) -> list[dict]:
    """One producer, one request at a time: the latency a lone request pays."""
    low_rows = []
    batches = make_batches(args.low_load_requests, args.batch, args.seed)
    for name in ("http-default", "http-pinned", "celery", "celery-unpinned", "celery-adaptive", "ceiling"):
        redis = redis_process if name.startswith("celery") else None
        low_rows.append(combine([run(targets[name], batches, 1, redis)]))
    add_ratios(low_rows)
    print_table("Low load: one producer, one request at a time", low_rows)
    return low_rows


def summarise(main_rows: list[dict], oversub_rows: list[dict], low_rows: list[dict], level: int) -> dict:
    """The issue's targets as ratios from this run."""

    def row(rows: list[dict], config: str, producers: int) -> dict | None:
        return next((r for r in rows if r["config"] == config and r["producers"] == producers), None)

    lines = []
    figures: dict[str, float] = {}
    celery, ceiling_row, http = (row(main_rows, name, level) for name in ("celery", "ceiling", "http-default"))
    if celery and ceiling_row and http:
        figures["celery_vs_ceiling"] = celery["requests_per_s"] / ceiling_row["requests_per_s"]
        figures["celery_vs_http_default"] = celery["requests_per_s"] / http["requests_per_s"]
        best_http = max(
            r["requests_per_s"] for r in main_rows if r["producers"] == level and r["config"].startswith("http")
        )
        figures["celery_vs_best_http"] = celery["requests_per_s"] / best_http
        lines.append(f"celery / ceiling at {level} producers: {figures['celery_vs_ceiling']:.3f} (target >= 0.95)")
        lines.append(
            f"celery / http-default at {level}: {figures['celery_vs_http_default']:.3f}; "
            f"/ best HTTP: {figures['celery_vs_best_http']:.3f}"
        )
    for r in oversub_rows:
        if re.search(r"-\d+t$", r["config"]):
            pinned = row(oversub_rows, "celery" if r["config"].startswith("celery") else "http-pinned", level)
            if pinned:
                key = f"{r['config']}_vs_pinned"
                figures[key] = r["requests_per_s"] / pinned["requests_per_s"]
                lines.append(
                    f"{r['config']}: {figures[key]:.2f}x the pinned throughput, p95 {r['latency_p95_s']:.2f} s "
                    f"vs {pinned['latency_p95_s']:.2f} s, {r['peak_os_threads']} threads vs {pinned['peak_os_threads']}"
                )
    low_celery, low_http = row(low_rows, "celery", 1), row(low_rows, "http-default", 1)
    if low_celery and low_http:
        ratio = low_celery["latency_mean_s"] / low_http["latency_mean_s"]
        figures["low_load_latency_celery_vs_http_default"] = ratio
        lines.append(
            f"one producer: celery {low_celery['latency_mean_s']:.2f} s vs http-default "
            f"{low_http['latency_mean_s']:.2f} s mean latency ({ratio:.2f}x)"
        )
    adaptive, adaptive_low = row(main_rows, "celery-adaptive", level), row(low_rows, "celery-adaptive", 1)
    if adaptive and celery and adaptive_low and low_celery:
        figures["adaptive_vs_celery_throughput"] = adaptive["requests_per_s"] / celery["requests_per_s"]
        figures["adaptive_vs_celery_low_load_latency"] = adaptive_low["latency_mean_s"] / low_celery["latency_mean_s"]
        lines.append(
            f"adaptive threads: throughput at {level} producers {figures['adaptive_vs_celery_throughput']:.2f}x "
            f"pinned, one-producer latency {adaptive_low['latency_mean_s']:.2f} s vs "
            f"{low_celery['latency_mean_s']:.2f} s ({figures['adaptive_vs_celery_low_load_latency']:.2f}x)"
        )
    return {"figures": figures, "lines": lines}


if __name__ == "__main__":
    main()

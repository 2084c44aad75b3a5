"""Every runtime side by side in one run (issue 40): the measured precision choice, throughput, one-text
latency at idle with its split, and cold start, on this host, with the CPU named.

1. The measured choice: `inference-tasks export-model --backend openvino` (precision auto) as a user
   runs it: each precision this CPU runs (f32, bf16 where it has bf16 units, int8) timed with one
   thread and gated against torch; the OpenVINO worker below serves its winner.
2. `benchmarks.serving --runtimes-only`: torch vs OpenVINO (the measured choice) vs int8 through
   Celery and in process on 64-text batches and the mixed workload, micro-batched one-text tasks,
   single sentences from 10 producers, and Infinity where benchmarks/peers/setup_infinity.sh set it up.
3. One text at a time at idle, per runtime: the producer's call to its result (it has it: p50,
   p99) and to the stored result (the result's own `date_done`), push to stored result (from the
   send stamp the producer takes just before its LPUSH: harness/pushes.py), and that time's split
   from each result's `usage`: `queue_ms` (the send stamp to the task's work: queue wait,
   screening, the hand-off to the child), `inference_ms` (the task's own work: its forward pass,
   tokenizing and checks), and the rest (STARTED and the result stored). Issue 40's goal: push to
   stored result p50 <= the forward pass + 3 ms.
4. Cold start per runtime: launch to `ready` and to a waiting task's result, the workers started as
   deploy/ starts them (`inference-tasks worker`).

    .venv/bin/python -m benchmarks.runtimes_report            # ~15 minutes on 2 cores
    .venv/bin/python -m benchmarks.runtimes_report --quick    # every path at smoke size
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks import cold_start, runtimes, serving
from benchmarks.harness.alternation import alternated
from benchmarks.harness.pushes import GOAL_OVER_OWN_WORK_MS, PushStamps, one_text_split, one_text_timed
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.runner import run
from benchmarks.harness.workload import REPO_ROOT, make_batches, ticket_texts
from inference_tasks.config import Settings
from inference_tasks.worker.runtimes.openvino.export import export_openvino
from inference_tasks.worker.runtimes.openvino.precision_choice import read_record
from tests.support import localstack
from tests.support.localstack import clean_env

SERVED = {"torch": "celery", "openvino (measured choice)": "celery-openvino", "openvino int8": "celery-int8"}


def own_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-tasks", type=int, default=240, help="one-at-a-time tasks per runtime")
    parser.add_argument("--cold-launches", type=int, default=3, help="cold launches per runtime")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "runtimes_report.json")


def measured_choice(cache: Path) -> dict[str, Any]:
    """export-model (precision auto) as a user runs it, into `cache`; its record of every candidate."""
    command = [sys.executable, "-m", "inference_tasks.ops.cli", "export-model", "--backend", "openvino"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache)),
                          capture_output=True, text=True, check=True)  # fmt: skip
    print(done.stdout, end="", flush=True)
    record = read_record(export_openvino(Settings(model_cache=str(cache))).path)
    assert record is not None, "export-model measured nothing"
    return record


def idle_one_text(targets: dict[str, Any], tasks: int, rounds: int) -> dict[str, dict[str, float]]:
    """One text at a time to each served runtime (the worker idle at every push), alternated by round."""
    texts = ticket_texts()
    samples: dict[str, list[tuple[float, ...]]] = {label: [] for label in SERVED}
    stamps = PushStamps()
    try:
        for _, label in alternated(list(SERVED), rounds):
            app = targets[SERVED[label]].worker.app
            for index in range(max(1, tasks // rounds)):
                samples[label].append(one_text_timed(app, stamps, texts[index % len(texts)]))
    finally:
        stamps.close()
    return {label: one_text_split(rows) for label, rows in samples.items()}


def cold_starts(cache: Path, work: Path, launches: int) -> dict[str, dict[str, float]]:
    """Launch to ready and to first result per runtime, started as deploy/ starts them, alternated."""
    configs = {
        "torch": {},
        "openvino (measured choice)": {"backend": "openvino", "model_cache": str(cache)},
        "openvino int8": {"backend": "openvino", "model_cache": str(cache), "openvino_precision": "int8"},
        "multilingual (numpy)": {"model": "multilingual"},
    }
    runs = cold_start.timed_launches(
        {label: (REPO_ROOT, cold_start.PRESET, options) for label, options in configs.items()}, work / "cold", launches
    )
    return {
        label: {key: statistics.median(float(run[key]) for run in found) for key in ("ready_s", "first_result_s")}
        for label, found in runs.items()
    }


def served_runs(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The serving benchmark's runtime section, then the idle one-text runs on the same workers."""
    cores, worker_cpus = serving.confine(args)
    server = localstack.start_redis(work / "redis")
    targets: dict[str, Any] = {}
    try:
        targets = serving.start_targets(args, server, work, cores, worker_cpus, [])
        warm = make_batches(cores * 2, args.batch, seed=args.seed + 1)
        for target in targets.values():
            run(target, warm, cores * 2, None)
        level = int(args.levels.split(",")[0])
        section = runtimes.runtimes_section(targets, args, level, psutil.Process(server.process.pid))
        idle = idle_one_text(targets, args.idle_tasks, max(1, args.runtime_rounds))
    finally:
        serving.stop_all(targets, server)
    return section, idle


def side_by_side(
    record: dict[str, Any], section: dict[str, Any], idle: dict[str, Any], cold: dict[str, Any], level: int
) -> None:  # fmt: skip
    rate = {row["config"]: row["sentences_per_s"] for row in section["rows"]}
    single = {row["config"]: row for row in section["single_sentences"]}
    print(f"\nCPU: {cpu_name()}; the measured choice: {record['winner']} "
          f"(f32 / bf16 / int8 candidates: {', '.join(record['candidates'])})")  # fmt: skip
    for name, row in record["candidates"].items():
        print(f"  {name:>5}: {row['batch_texts_per_s']:7.1f} sentences/s in process (64-text, one thread), "
              f"one sentence {row['single_p50_ms']:.2f} ms, min cosine {row['min_cosine']:.5f}")  # fmt: skip
    header = (f"{'runtime':<28}{'64-text s/s':>12}{'in process':>11}{f'{level} prod. p50':>13}{'idle p50':>9}{'p99':>7}"
              f"{'stored':>8}{'push':>7}{'queue':>7}{'own':>7}{'rest':>7}{'ready s':>9}{'1st res':>8}")  # fmt: skip
    print(header)
    for label, config in SERVED.items():
        ceiling = config.replace("celery", "ceiling")
        one, boot = idle[label], cold.get(label, {})
        print(f"{label:<28}{rate[config]:12.0f}{rate[ceiling]:11.0f}"
              f"{single[config]['latency_p50_s'] * 1000:12.1f} {one['p50_ms']:8.1f}{one['p99_ms']:7.1f}"
              f"{one['stored_p50_ms']:8.1f}{one['push_to_stored_p50_ms']:7.1f}"
              f"{one['queue_p50_ms']:7.2f}{one['inference_p50_ms']:7.2f}{one['rest_p50_ms']:7.2f}"
              f"{boot.get('ready_s', float('nan')):9.2f}{boot.get('first_result_s', float('nan')):8.2f}")  # fmt: skip
    if "infinity" in rate:
        print(f"{'infinity (HTTP peer)':<28}{rate['infinity']:12.0f}{'':>11}"
              f"{single['infinity']['latency_p50_s'] * 1000:12.1f}")  # fmt: skip
    for label in cold:
        if label not in SERVED:
            print(f"{label:<28}{'':>88}{cold[label]['ready_s']:9.2f}{cold[label]['first_result_s']:8.2f}")
    for label, one in idle.items():
        verdict = "met" if one["over_own_work_ms"] <= GOAL_OVER_OWN_WORK_MS else "not met"
        print(f"  {label}: idle push to stored result p50 is the task's own work + {one['over_own_work_ms']:.2f} ms "
              f"(goal <= {GOAL_OVER_OWN_WORK_MS:.0f} ms: {verdict}); from the producer's call, "
              f"+ {one['over_own_work_from_call_ms']:.2f} ms")  # fmt: skip


def main() -> None:
    args = serving.parse_args(__doc__.splitlines()[0], own_options)
    args.runtimes_only = True
    if args.quick:
        args.idle_tasks, args.cold_launches = 8, 1
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-runtimes-"))
    record = measured_choice(work / "models")
    section, idle = served_runs(args, work)
    cold = cold_starts(work / "models", work, args.cold_launches)
    side_by_side(record, section, idle, cold, int(args.levels.split(",")[0]))
    print("\n".join(f"  {line}" for line in section["lines"]))
    write_report(args.report, "runtimes_report", {
        "measured_choice": record, "runtimes": section, "idle_one_text": idle, "cold_start": cold,
        "total_s": time.perf_counter() - started,
    })  # fmt: skip


if __name__ == "__main__":
    main()

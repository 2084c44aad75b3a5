"""GPU check (issue: GPU placement): a prefork worker with 2 children on `cuda` versus the same on `cpu`.

Starts Redis and, one device after the other, a worker with 2 children; sends the same seeded
embed tasks (64 sentences each) to each; prints per-child device and GPU memory (from the
workers' own `inference_processes` reply), throughput on each device and their ratio, and
whether the worker's main process ever had a CUDA context (it must not). Made for a machine
with an NVIDIA GPU and a CUDA build of torch==2.13.0; on a machine without one, `--devices cpu`
runs the same path (the test suite does that at smoke size so the script cannot rot).

    .venv/bin/python -m benchmarks.gpu_check                 # cuda and cpu, 200 tasks each (< 5 min)
    .venv/bin/python -m benchmarks.gpu_check --devices cpu --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.workload import make_batches
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack
from tests.support.control import worker_report

RESULT_TIMEOUT_S = 300


def run_on(device: str, server: localstack.RedisServer, db: int, work: Path, batches: list[list[str]]) -> dict:
    worker = localstack.start_worker(
        f"gpu-check-{device.replace(':', '-')}", server.url(db), work / "workers", {}, concurrency=2, device=device
    )
    try:
        worker.app.send_task(EMBED_TASK, args=[batches[0][:2]]).get(timeout=RESULT_TIMEOUT_S)  # every child warm
        started = time.perf_counter()
        results = [worker.app.send_task(EMBED_TASK, args=[batch]) for batch in batches]
        for result in results:
            result.get(timeout=RESULT_TIMEOUT_S)
        elapsed = time.perf_counter() - started
        report = worker_report(worker.app)
    finally:
        worker.stop()
    return {
        "device": device,
        "tasks": len(batches),
        "seconds": round(elapsed, 3),
        "tasks_per_s": round(len(batches) / elapsed, 2),
        "sentences_per_s": round(sum(map(len, batches)) / elapsed, 1),
        "children": [
            {"slot": child["slot"], "device": child["device"], "gpu_memory_mib": child["gpu_memory_mib"]}
            for child in report["children"]
        ],
        "main_process_cuda_initialized": report["main"]["cuda_initialized"],
        "mps_active": report["mps_active"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="cuda,cpu", help="comma-separated, run in this order")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke size: 4 tasks per device")
    parser.add_argument("--out", type=Path, default=localstack.REPO_ROOT / "benchmarks" / "results" / "gpu_check.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks = 4
    batches = make_batches(args.tasks, 64, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        server = localstack.start_redis(work / "redis")
        try:
            runs = [run_on(device, server, db, work, batches) for db, device in enumerate(args.devices.split(","), 1)]
        finally:
            server.process.terminate()
            server.process.wait(timeout=10)
    for run in runs:
        children = ", ".join(f"slot {c['slot']}: {c['device']} ({c['gpu_memory_mib']} MiB)" for c in run["children"])
        print(
            f"{run['device']:>7}: {run['tasks_per_s']:.2f} tasks/s, {run['sentences_per_s']:.0f} sentences/s; "
            f"children {children}; main process CUDA context: {run['main_process_cuda_initialized']}; "
            f"MPS: {run['mps_active']}"
        )
    by_device = {run["device"]: run for run in runs}
    if "cuda" in by_device and "cpu" in by_device:
        print(f"cuda / cpu throughput: {by_device['cuda']['tasks_per_s'] / by_device['cpu']['tasks_per_s']:.2f} x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    if any(run["main_process_cuda_initialized"] for run in runs):
        sys.exit("a worker's main process initialised CUDA")


if __name__ == "__main__":
    main()

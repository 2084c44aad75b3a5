"""GPU check (issue 44): the worker's GPU path on a real GPU host, against the CPU worker of the same host.

One redis-server, then one configuration after the other, each a real `celery worker`:

- **cuda** with 1, 2 and 4 children (float32, the default), and 4 in float16: 64-text batches
  (closed loop, enough producers to keep every child busy) and a burst of one-text tasks
  (micro-batched); per child its device, torch's reserved memory and the driver's (context
  included); whether the main process ever had a CUDA context (it must not: children fork from it);
  the minimum cosine of served vectors to the CPU float32 reference (.gpu-carry/reference.json).
- **cpu**: the same workloads on one pinned child per core of this host.
- **mps**: the largest cuda configuration again under NVIDIA MPS, where its daemon starts.
- **oversubscription**: the incident's case on this host's cores, 10 concurrent 64-text requests:
  FastAPI/Uvicorn with the libraries' default threads vs one thread per process, and our worker
  pinned vs unpinned.
- **recycle**: cuda children recycled under load (worker_max_tasks_per_child): fork to ready and to
  the first task served on CUDA, read from the worker's log.

The report is written after every section, so a run cut short still leaves what it measured.
`--dry-run` runs every path on the CPU at smoke size (the test suite does, so the script cannot rot).

    bash benchmarks/gpu_host/run.sh                 # on the GPU host: ~5 minutes (docs/benchmarks-log.md "GPU")
    .venv/bin/python -m benchmarks.gpu_check --dry-run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.gpu_host.sections import Check, oversubscription, recycle, serve
from benchmarks.harness import gpu
from benchmarks.harness.host import stop_cleanly_on_term
from benchmarks.harness.report import cpu_name, write_report
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.cores import available_cores
from tests.support import localstack

DEFAULT_OUT = localstack.REPO_ROOT / "benchmarks" / "results" / "gpu_check.json"
REFERENCE = localstack.REPO_ROOT / ".gpu-carry" / "reference.json"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", default="1,2,4", help="cuda children per configuration")
    parser.add_argument("--batches", type=int, default=150, help="64-text tasks per configuration")
    parser.add_argument("--one-text", type=int, default=2000, help="one-text tasks per configuration")
    parser.add_argument("--cpu-children", type=int, default=available_cores(), help="children of the CPU worker")
    parser.add_argument("--oversub-producers", type=int, default=10)
    parser.add_argument("--oversub-requests", type=int, default=40)
    parser.add_argument("--recycle-after", type=int, default=15, help="worker_max_tasks_per_child when recycling")
    parser.add_argument("--recycle-batches", type=int, default=150)
    # MPS last: a daemon that starts but cannot serve leaves its clients waiting, after every other figure.
    parser.add_argument("--sections", default="cuda,cpu,oversubscription,recycle,mps")
    parser.add_argument("--model", default=os.environ.get("INFERENCE_MODEL", DEFAULT_MODEL))
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="texts and CPU float32 vectors")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--dry-run", "--quick", action="store_true", help="every path on the CPU, smoke size")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    args.device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:
        args.children, args.batches, args.one_text, args.cpu_children = "1,2", 4, 16, 2
        args.oversub_producers, args.oversub_requests, args.recycle_after, args.recycle_batches = 2, 4, 2, 8
    return args


def reference(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    args = parse_args()
    stop_cleanly_on_term()
    sections = set(args.sections.split(","))
    children = [int(n) for n in args.children.split(",")]
    report: dict[str, Any] = {
        "cpu": cpu_name(), "cores": available_cores(), "gpu": gpu.describe(), "device": args.device,
        "torch": torch_build(), "model": args.model, "dry_run": args.dry_run, "configs": [],
    }  # fmt: skip
    print(f"CPU {report['cpu']} ({report['cores']} cores); GPU {report['gpu']}; torch {report['torch']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        server = localstack.start_redis(work / "redis")
        check = Check(args, server, work, reference(args.reference))
        try:
            if "cuda" in sections:
                for count in children:  # labelled cuda-N even on a dry run's CPU; "device" says which
                    report["configs"].append(serve(check, f"cuda-{count}", args.device, count))
                    save(args.out, report)
                if args.device != "cpu":  # float16 is a CUDA setting: the CPU always runs float32
                    last = children[-1]
                    report["configs"].append(serve(check, f"cuda-{last}-f16", args.device, last, "float16"))
                    save(args.out, report)
            if "cpu" in sections:
                report["configs"].append(serve(check, f"cpu-{args.cpu_children}", "cpu", args.cpu_children))
                save(args.out, report)
            if "oversubscription" in sections:
                report["oversubscription"] = oversubscription(check)
                save(args.out, report)
            if "recycle" in sections:
                report["recycle"] = recycle(check, args.device)
                save(args.out, report)
            if "mps" in sections:
                report["mps"] = with_mps(check, work, args.device, children[-1])
                save(args.out, report)
        except BaseException:
            print_logs(work)
            raise
        finally:
            server.process.terminate()
            server.process.wait(timeout=10)
    summarise(report)
    if any(config["main_process_cuda_initialized"] for config in report["configs"]):
        sys.exit("a worker's main process initialised CUDA")


def print_logs(work: Path) -> None:
    """The end of every worker's and service's log: a failed section's cause, before the folder goes."""
    for log in sorted(work.rglob("*.log")):
        print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}", file=sys.stderr)


def torch_build() -> str:
    import torch

    return f"{torch.__version__} (CUDA {torch.version.cuda})"


def with_mps(check: Check, work: Path, device: str, children: int) -> dict[str, Any]:
    """The largest cuda configuration under an MPS daemon, or why MPS could not be started."""
    daemon = gpu.MpsDaemon(work / "mps-log")
    if device != "cuda" or not daemon.start():
        print(f"MPS: not measured ({daemon.error or 'dry run'})", flush=True)
        return {"started": False, "error": daemon.error or "dry run"}
    try:
        config = serve(check, f"cuda-{children}-mps", device, children)
    finally:
        daemon.stop()
    return {"started": True, "config": config, "daemon_log": daemon.log_tail()}


def save(out: Path, report: dict[str, Any]) -> None:
    write_report(out, "gpu_check", report)


def summarise(report: dict[str, Any]) -> None:
    print(f"\nGPU check on {report['gpu']}, CPU {report['cpu']} ({report['cores']} cores), torch {report['torch']}")
    print("config          batch sent/s  p50 ms  one-text tasks/s  p50 ms  p99 ms  min cos  children")
    configs = list(report["configs"]) + ([report["mps"]["config"]] if report.get("mps", {}).get("config") else [])
    for config in configs:
        batch, one = config["batches"], config["one_text"]
        children = "; ".join(
            f"{child['device']} torch {child['gpu_memory_mib']} MiB driver {child.get('driver_mib')} MiB"
            for child in config["children"]
        )
        print(
            f"{config['label']:<15} {batch['sentences_per_s']:>12.0f} {batch['p50_ms']:>7.1f} "
            f"{one['tasks_per_s']:>17.0f} {one['p50_ms']:>7.1f} {one['p99_ms']:>7.1f} "
            f"{config['min_cosine']!s:>8}  {children}"
        )
    if recycled := report.get("recycle"):
        print(f"recycle: {recycled}")


if __name__ == "__main__":
    main()

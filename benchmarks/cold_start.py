"""Cold start: a worker's launch to `ready`, and to the stored result of a task that was already waiting
(KEDA scaling a pool up from zero, a roll-out), per runtime: torch (the default: the native BERT
encoder), torch on sentence-transformers (INFERENCE_TORCH_ENGINE), OpenVINO f32 and the numpy
multilingual model. One child, the model preloaded as shipped; the runtimes alternated over
rounds, each launch on a fresh Redis database. Also the main process's import time (worker_info's
parent_import_seconds) and what it imported (loaded_runtimes).

    .venv/bin/python -m benchmarks.cold_start            # ~3 minutes
    .venv/bin/python -m benchmarks.cold_start --quick
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT
from inference_tasks.producer import collect, send
from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from tests.support.localstack import clean_env, producer_app, start_redis, start_worker

RESULT_TIMEOUT_S = 180
READY_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/MainProcess\] \S+ ready\.", re.M)


def configurations(cache: Path) -> dict[str, dict[str, Any]]:
    return {
        "torch": {},
        "torch (sentence-transformers)": {"torch_engine": "sentence-transformers"},
        "openvino f32": {"backend": "openvino", "model_cache": str(cache), "openvino_precision": "f32"},
        "multilingual (numpy)": {"model": "multilingual"},
    }


def export(cache: Path) -> None:
    """The OpenVINO f32 export, once, into `cache` (not timed)."""
    command = ["export-model", "--backend", "openvino", "--precision", "f32"]
    subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", *command],
        cwd=REPO_ROOT, env=clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache)), check=True, capture_output=True,
    )  # fmt: skip


def one_launch(url: str, work: Path, name: str, options: dict[str, Any]) -> dict[str, float | list[str]]:
    """Queue one task, launch a worker, and time its ready line and the task's result from the launch."""
    app = producer_app(url)
    waiting = send(app, EMBED_TASK, args=[["a task that was waiting"]], model=options.get("model"))
    launched = time.time()
    worker = start_worker(name, url, work, dict(os.environ), wait_ready=False, concurrency=1, task_events="false",
                          **options)  # fmt: skip
    try:
        collect(waiting, RESULT_TIMEOUT_S)
        first_result = time.time() - launched
        found = READY_LINE.findall(worker.log())
        ready = datetime.strptime(found[-1], "%Y-%m-%d %H:%M:%S,%f").timestamp() - launched
        queue = f"inference.{options['model']}" if "model" in options else "inference"
        info = app.send_task(WORKER_INFO_TASK, queue=queue).get(timeout=RESULT_TIMEOUT_S)
    finally:
        worker.stop()
    return {"ready_s": ready, "first_result_s": first_result, "import_s": info["parent_import_seconds"],
            "loaded": info.get("loaded_runtimes", ["(not reported)"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "cold_start.json")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    work = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    export(work / "cache")
    configs = configurations(work / "cache")
    server = start_redis(work / "redis")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    try:
        for number, (_, name) in enumerate(alternated(list(configs), rounds)):
            runs[name].append(one_launch(server.url(number), work, f"cold{number}", configs[name]))
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    rows = {
        name: {
            "launches": len(found),
            **{key: statistics.median(run[key] for run in found) for key in ("ready_s", "first_result_s", "import_s")},
            "loaded_runtimes": found[-1]["loaded"],
        }
        for name, found in runs.items()
    }
    print(f"CPU: {cpu_name()}; one child, preloaded; median of {rounds} launch(es) per runtime, alternated")
    print(f"{'runtime':<22} {'ready s':>8} {'first result s':>15} {'imports s':>10}  loaded")
    for name, row in rows.items():
        print(f"{name:<22} {row['ready_s']:8.2f} {row['first_result_s']:15.2f} {row['import_s']:10.2f}  "
              f"{', '.join(row['loaded_runtimes'])}")  # fmt: skip
    write_report(args.out, "cold_start", {"rounds": rounds, "results": rows})


if __name__ == "__main__":
    main()

"""Cold start: a worker's launch to `ready`, and to the stored result of a task that was already waiting
(KEDA scaling a pool up from zero, a roll-out), per runtime: torch (the default: the native BERT
encoder), torch on sentence-transformers (INFERENCE_TORCH_ENGINE), OpenVINO f32 and the numpy
multilingual model, each started as deploy/ starts it (`inference-tasks worker`, Celery's mingle and
gossip on), and torch through the README's plain `celery -A inference_tasks worker` too. One
child, the model preloaded as shipped; the launches alternated over rounds, each on a fresh Redis
database with no other worker. Also the main process's import time (worker_info's
parent_import_seconds) and what it imported (loaded_runtimes).

`--against REV` adds, alternated in the same run, the same launches from a git worktree of REV (the
same virtual environment): the commit before a change, side by side.

    .venv/bin/python -m benchmarks.cold_start                     # ~3 minutes
    .venv/bin/python -m benchmarks.cold_start --against HEAD~3    # ~6 minutes
    .venv/bin/python -m benchmarks.cold_start --quick
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
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


PRESET = ("inference_tasks.ops.cli", "worker")
PLAIN = ("celery", "-A", "inference_tasks", "worker", "-l", "info")


def configurations(cache: Path) -> dict[str, tuple[tuple[str, ...], dict[str, Any]]]:
    """name -> (the module and arguments `python -m` runs, INFERENCE_* settings)."""
    return {
        "torch": (PRESET, {}),
        "torch, celery -A": (PLAIN, {}),
        "torch (sentence-transformers)": (PRESET, {"torch_engine": "sentence-transformers"}),
        "openvino f32": (PRESET, {"backend": "openvino", "model_cache": str(cache), "openvino_precision": "f32"}),
        "multilingual (numpy)": (PRESET, {"model": "multilingual"}),
    }


def launch_command(tree: Path, module_and_args: tuple[str, ...], name: str) -> tuple[str, ...]:
    """`python -m ...` run from `tree` (its code imported first), as the same process (exec)."""
    python = " ".join(shlex.quote(part) for part in (sys.executable, "-m", *module_and_args, "-n", f"{name}@%h"))
    return ("/bin/sh", "-c", f"cd {shlex.quote(str(tree))} && exec {python}")


def worktree_of(revision: str, work: Path) -> Path:
    """A detached git worktree of `revision` (removed by `remove_worktree`)."""
    tree = work / f"tree-{revision.replace('/', '_')}"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=REPO_ROOT, check=True,
                   capture_output=True)  # fmt: skip
    return tree


def remove_worktree(tree: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO_ROOT, check=False, capture_output=True)


def export(cache: Path) -> None:
    """The OpenVINO f32 export, once, into `cache` (not timed)."""
    command = ["export-model", "--backend", "openvino", "--precision", "f32"]
    subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", *command],
        cwd=REPO_ROOT, env=clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache)), check=True, capture_output=True,
    )  # fmt: skip


def one_launch(
    url: str, work: Path, name: str, command: tuple[str, ...], options: dict[str, Any]
) -> dict[str, float | list[str]]:
    """Queue one task, launch a worker, and time its ready line and the task's result from the launch."""
    app = producer_app(url)
    waiting = send(app, EMBED_TASK, args=[["a task that was waiting"]], model=options.get("model"))
    launched = time.time()
    worker = start_worker(name, url, work, dict(os.environ), wait_ready=False, concurrency=1, task_events="false",
                          command=command, **options)  # fmt: skip
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


def timed_launches(
    launches: dict[str, tuple[Path, tuple[str, ...], dict[str, Any]]], work: Path, rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """Every launch (label -> the tree it runs from, `python -m` module and arguments, INFERENCE_* settings)
    `rounds` times, alternated, each on a fresh database of one redis-server: their one_launch figures."""
    server = start_redis(work / "redis")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in launches}
    try:
        for number, (_, label) in enumerate(alternated(list(launches), rounds)):
            tree, module_and_args, options = launches[label]
            command = launch_command(tree, module_and_args, f"cold{number}")
            runs[label].append(one_launch(server.url(number), work, f"cold{number}", command, options))
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--against", metavar="REV", help="also launch from a git worktree of REV, alternated")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "cold_start.json")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    work = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    export(work / "cache")
    configs = configurations(work / "cache")
    trees = {"": REPO_ROOT, **({f" @ {args.against}": worktree_of(args.against, work)} if args.against else {})}
    launches = {name + suffix: (tree, *configs[name]) for suffix, tree in trees.items() for name in configs}
    try:
        runs = timed_launches(launches, work, rounds)
    finally:
        for suffix, tree in trees.items():
            if suffix:
                remove_worktree(tree)
    rows = {
        label: {
            "launches": len(found),
            **{key: statistics.median(run[key] for run in found) for key in ("ready_s", "first_result_s", "import_s")},
            "loaded_runtimes": found[-1]["loaded"],
        }
        for label, found in runs.items()
    }
    print(f"CPU: {cpu_name()}; one child, preloaded; median of {rounds} launch(es) each, alternated")
    width = max(len(label) for label in rows) + 1
    print(f"{'runtime':<{width}} {'ready s':>8} {'first result s':>15} {'imports s':>10}  loaded")
    for label, row in rows.items():
        print(f"{label:<{width}} {row['ready_s']:8.2f} {row['first_result_s']:15.2f} {row['import_s']:10.2f}  "
              f"{', '.join(row['loaded_runtimes'])}")  # fmt: skip
    report = {"rounds": rounds, "against": args.against, "results": rows}
    write_report(args.out, "cold_start", report)
    return None


if __name__ == "__main__":
    main()

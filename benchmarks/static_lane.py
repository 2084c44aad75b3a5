"""The static lane through Celery: a worker serving a static model (model2vec, distilled from the default
model by `inference-tasks distil-model`) against the worker of the model it came from on OpenVINO (its
measured precision, as `export-model` chose it here), each alone on the host for its round (2 children,
its own redis-server), rounds alternated: 256-text tasks pushed at once (sentences/s), one text at a time
at idle (push to result p50), and each worker's launch to ready. Both models are made as a user makes
them, into a temporary model cache (the distillation ~15 s, the export and its measurement ~1-2 min).

    .venv/bin/python -m benchmarks.static_lane            # ~4 minutes
    .venv/bin/python -m benchmarks.static_lane --quick
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

from benchmarks.harness.alternation import alternated
from benchmarks.harness.pushes import all_at_once, one_at_a_time
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, make_batches, ticket_texts
from inference_tasks.producer import send
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import clean_env, start_redis, start_worker

BATCH_TEXTS = 256
# The goals: the static worker's 256-text sentences/s against the OpenVINO teacher's.
GOAL_RATIO = 8.0
DONE_WHEN_RATIO = 4.0


def prepare(cache: Path) -> Path:
    """The teacher's OpenVINO export (measured precision) and the static model; the static model's directory."""
    environment = clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache))
    cli = [sys.executable, "-m", "inference_tasks.ops.cli"]
    subprocess.run([*cli, "export-model", "--backend", "openvino"], cwd=REPO_ROOT, env=environment,
                   capture_output=True, text=True, check=True)  # fmt: skip
    done = subprocess.run([*cli, "distil-model", "minilm"], cwd=REPO_ROOT, env=environment,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return Path(done.stdout.strip().splitlines()[-1])


def measure(
    worker: Any, model: str | None, batches: list[list[str]], singles: list[str], encoding: str | None
) -> dict[str, float]:  # fmt: skip
    """256-text tasks all at once (sentences/s) and one text at a time (p50 ms) through `worker`."""
    app = worker.app
    kwargs = {"encoding": encoding} if encoding else {}

    def embed(texts: list[str]) -> Any:
        return send(app, EMBED_TASK, args=[texts], kwargs=kwargs, model=model)

    one_at_a_time(lambda index: embed([singles[index]]), 5)  # warm: connections made, children warm
    tasks_per_s = all_at_once(lambda index: embed(batches[index]), len(batches))
    latencies = one_at_a_time(lambda index: embed([singles[index % len(singles)]]), len(singles))
    return {"sentences_per_s": tasks_per_s * BATCH_TEXTS, "one_text_p50_ms": statistics.median(latencies) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16, help="256-text tasks per round and worker")
    parser.add_argument("--singles", type=int, default=40, help="one-text tasks per round and worker")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--encoding", default=None, help='the results\' encoding (default JSON; "f32-base64": packed)')
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "static_lane.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.singles, args.rounds = 4, 5, 1
    work = Path(tempfile.mkdtemp(prefix="bench-static-"))
    static_dir = prepare(work / "models")
    models = work / "models.toml"
    models.write_text(f'[models.static]\nsource = "{static_dir}"\nkind = "static"\n')
    workers = {
        "static (model2vec)": ({"model": "static", "models_file": str(models)}, "static"),
        "openvino (teacher)": ({"backend": "openvino", "model_cache": str(work / "models")}, None),
    }
    servers = {label: start_redis(work / f"redis-{index}") for index, label in enumerate(workers)}
    batches = make_batches(args.tasks, BATCH_TEXTS, seed=7)
    singles = ticket_texts()[: args.singles]
    rows: dict[str, list[dict[str, float]]] = {label: [] for label in workers}
    try:
        for round_index, label in alternated(list(workers), args.rounds):
            settings, model = workers[label]
            launched = time.perf_counter()
            worker = start_worker(f"static-lane-{round_index}-{label.split()[0]}", servers[label].url(0), work,
                                  dict(os.environ), concurrency=2, **settings)  # fmt: skip
            ready_s = time.perf_counter() - launched
            try:
                rows[label].append(measure(worker, model, batches, singles, args.encoding) | {"ready_s": ready_s})
            finally:
                worker.stop()
    finally:
        for server in servers.values():
            server.process.terminate()
            server.process.wait(timeout=10)
    results = {
        label: {key: statistics.median(row[key] for row in found) for key in found[0]} for label, found in rows.items()
    }
    static, teacher = results["static (model2vec)"], results["openvino (teacher)"]
    ratio = static["sentences_per_s"] / teacher["sentences_per_s"]
    print(f"CPU: {cpu_name()}; each worker alone (2 children, its own redis-server), median of {args.rounds} "
          f"round(s), results as {args.encoding or 'JSON'}")  # fmt: skip
    print(f"{'worker':<22} {'256-text sent/s':>16} {'one text p50 ms':>16} {'launch to ready s':>18}")
    for label, row in results.items():
        print(f"{label:<22} {row['sentences_per_s']:>16.0f} {row['one_text_p50_ms']:>16.2f} {row['ready_s']:>18.2f}")
    goals = f"goal >= {GOAL_RATIO:.0f}x; done-when >= {DONE_WHEN_RATIO:.0f}x"
    print(f"static / teacher: {ratio:.1f}x the sentences/s ({goals})")
    report = {"batch_texts": BATCH_TEXTS, "encoding": args.encoding, "tasks": args.tasks, "rounds": args.rounds}
    write_report(args.out, "static_lane", report | {"results": results, "ratio": ratio})


if __name__ == "__main__":
    main()

"""The fast default (issue 56): a worker with no runtime setting (auto) against explicit torch, explicit
OpenVINO bf16 (as before the auto runtime: no one-text static shapes) and explicit CTranslate2 int8,
through Celery, one worker at a time on its own redis-server, alternated round by round; then the
in-process anchors, one thread, on the same short tickets.

Per round and runtime: a worker (2 children, as deployed) started for its round, 64-text tasks pushed
all at once (sentences/s), then one-text tasks one at a time with the worker idle at every push (push
to stored result p50/p99, harness/pushes.py). The model cache is prepared first by `export-model`
(auto), as setup.sh does, and its race printed. ONNX Runtime is not an anchor here: it is not in the
lock (its dynamic int8 failed the accuracy gate: min cosine 0.926, docs/benchmarks.md).

    .venv/bin/python -m benchmarks.fast_default            # ~6 minutes on 2 cores
    .venv/bin/python -m benchmarks.fast_default --quick
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
from benchmarks.harness.pushes import PushStamps, all_at_once, one_text_split
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, make_batches, ticket_texts
from benchmarks.one_text import WARM_TASKS, idle_one_texts
from inference_tasks.producer import send
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import clean_env, start_redis, start_worker

MODEL = "all-MiniLM-L6-v2"


def runtimes(cache: Path) -> dict[str, dict[str, Any]]:
    """Worker settings per configuration; "default" sets no runtime at all."""
    on_cache = {"model_cache": str(cache)}
    return {
        "default (auto)": {"backend": None, **on_cache},
        "torch": {"backend": "torch"},
        "openvino bf16": {"backend": "openvino", "openvino_precision": "bf16", **on_cache},
        "ctranslate2 int8": {"backend": "ctranslate2", **on_cache},
    }


def prepare(cache: Path) -> str:
    """`inference-tasks export-model` into `cache`, as setup.sh does; its printed race."""
    done = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "export-model"], cwd=REPO_ROOT, capture_output=True,
        text=True, check=True, env=clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache)),
    )  # fmt: skip
    return "\n".join(line for line in done.stdout.splitlines() if line.startswith(("  ", "auto: serves")))


def throughput(app: Any, batches: list[list[str]]) -> float:
    """Sentences per second of `batches` (64-text tasks) pushed at once."""
    per_task = all_at_once(lambda index: send(app, EMBED_TASK, args=[batches[index]]), len(batches))
    return per_task * len(batches[0])


def anchor_encoders(cache: Path) -> dict[str, Any]:
    """torch, OpenVINO bf16 with and without the one-text static shapes, CTranslate2 int8: one thread each."""
    import torch

    from inference_tasks.worker.runtimes.auto.measure import ctranslate2_candidates
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.export_paths import export_path
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import SHAPE_BUCKETS, OpenVinoEncoder
    from inference_tasks.worker.runtimes.registry import runtime_loader

    torch.set_num_threads(1)
    source = resolve_model_path(MODEL)
    base = export_path(MODEL, source, cache)
    encoders: dict[str, Any] = {
        "torch f32": runtime_loader("torch").load_dense_encoder(MODEL, "cpu", LoadOptions()),
        "openvino bf16": OpenVinoEncoder(MODEL, base, "bf16"),
        "openvino bf16, static shapes": OpenVinoEncoder(MODEL, base, "bf16", SHAPE_BUCKETS),
        **ctranslate2_candidates(MODEL, source, cache),
    }
    for encoder in encoders.values():
        encoder.compile(1)
    return encoders


def in_process_anchors(cache: Path, rounds: int) -> dict[str, dict[str, float]]:
    """Each anchor on 64 short tickets and on 32 single tickets, alternated, with its least cosine to
    torch's vectors over the 64."""
    import numpy as np

    encoders = anchor_encoders(cache)
    texts = ticket_texts()
    batch, singles = texts[:64], texts[64:96]
    reference = encoders["torch f32"].encode(batch, True)
    cosines = {
        name: float(np.min((encoder.encode(batch, True) * reference).sum(axis=1))) for name, encoder in encoders.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in encoders}
    single_ms: dict[str, list[float]] = {name: [] for name in encoders}
    for _, name in alternated(list(encoders), rounds):
        began = time.perf_counter()
        encoders[name].encode(batch, True)
        seconds[name].append(time.perf_counter() - began)
        for text in singles:
            began = time.perf_counter()
            encoders[name].encode([text], True)
            single_ms[name].append((time.perf_counter() - began) * 1000)
    return {
        name: {
            "sentences_per_s": 64 / statistics.median(seconds[name]),
            "one_text_p50_ms": statistics.median(single_ms[name]),
            "min_cosine": cosines[name],
        }
        for name in encoders
    }


def through_celery(cache: Path, work: Path, rounds: int, tasks: int, one_texts: int) -> dict[str, dict[str, Any]]:
    """Each configuration's worker alone, alternated: 64-text sentences/s and idle one-text latency."""
    configs = runtimes(cache)
    servers = {label: start_redis(work / f"redis-{index}") for index, label in enumerate(configs)}
    batches, texts, stamps = make_batches(tasks, 64, seed=11), ticket_texts(), PushStamps()
    rates: dict[str, list[float]] = {label: [] for label in configs}
    rows: dict[str, list[tuple[float, ...]]] = {label: [] for label in configs}
    try:
        for round_index, label in alternated(list(configs), rounds):
            name = f"fast-{round_index}-{label.split()[0]}"
            worker = start_worker(name, servers[label].url(0), work, dict(os.environ), concurrency=2, **configs[label])
            try:
                idle_one_texts(worker.app, stamps, texts, WARM_TASKS)
                rates[label].append(throughput(worker.app, batches))
                rows[label] += idle_one_texts(worker.app, stamps, texts, one_texts)
            finally:
                worker.stop()
    finally:
        stamps.close()
        for server in servers.values():
            server.process.terminate()
            server.process.wait(timeout=10)
    return {
        label: {"sentences_per_s": statistics.median(rates[label]), **one_text_split(rows[label])} for label in configs
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=12, help="64-text tasks per round and runtime")
    parser.add_argument("--one-texts", type=int, default=40, help="idle one-text tasks per round and runtime")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "fast_default.json")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.tasks, args.one_texts = 1, 2, 5
    work = Path(tempfile.mkdtemp(prefix="bench-fast-default-"))
    cache = work / "models"
    race = prepare(cache)
    print(f"CPU: {cpu_name()}\nexport-model (auto), one thread per candidate:\n{race}")
    served = through_celery(cache, work, args.rounds, args.tasks, args.one_texts)
    print("Through Celery, one worker at a time (2 children, its own redis-server), alternated:")
    torch_rate, bf16_p50 = served["torch"]["sentences_per_s"], served["openvino bf16"]["push_to_stored_p50_ms"]
    for label, row in served.items():
        print(f"  {label:>16}: 64-text tasks {row['sentences_per_s']:7.1f} sentences/s "
              f"({row['sentences_per_s'] / torch_rate:.2f}x torch); one text idle: push to stored p50 "
              f"{row['push_to_stored_p50_ms']:.2f} ms (p99 {row['push_to_stored_p99_ms']:.2f}; "
              f"{row['push_to_stored_p50_ms'] - bf16_p50:+.2f} ms vs openvino bf16), own work "
              f"{row['inference_p50_ms']:.2f} ms + {row['over_own_work_ms']:.2f} ms")  # fmt: skip
    anchors = in_process_anchors(cache, args.rounds)
    print("In process, one thread, 64 short tickets / one ticket at a time, alternated:")
    for name, row in anchors.items():
        print(f"  {name:>28}: {row['sentences_per_s']:7.1f} sentences/s, one ticket {row['one_text_p50_ms']:.2f} ms, "
              f"min cosine to torch {row['min_cosine']:.4f}")  # fmt: skip
    write_report(args.out, "fast_default", {"race": race, "celery": served, "in_process": anchors})


if __name__ == "__main__":
    main()

"""Trainer benchmark: trained head vs zero-shot, trainer threads 1 vs all cores, inference during training.

Starts its own redis-server and workers on loopback, runs everything in one sitting (thread
counts alternated so machine drift hits both), prints a table and writes JSON.

    .venv/bin/python -m benchmarks.training [--corpus 2000] [--rounds 2] [--out benchmarks/results/training.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.report import write_report
from benchmarks.harness.workload import DATA, REPO_ROOT
from inference_tasks.cores import available_cores
from inference_tasks.routing import EMBED_CORPUS_TASK, EMBED_TASK, TRAIN_CLASSIFIER_TASK, WORKER_INFO_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 600
SENTENCES = [
    "The quarterly report shows revenue growth in every region except the north.",
    "Please reset my password, the reminder email never arrives.",
    "Our team would like an export of all invoices as a spreadsheet.",
    "The parcel was left at the wrong address and the courier does not answer.",
]


def dataset() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in DATA.open(encoding="utf-8")]
    return [row["text"] for row in rows], [row["label"] for row in rows]


def timed(app, task: str, queue: str | None = None, **kwargs) -> tuple[float, dict]:
    started = time.perf_counter()
    result = app.send_task(task, kwargs=kwargs, queue=queue).get(timeout=RESULT_TIMEOUT_S)
    return time.perf_counter() - started, result


def inference_throughput(app, requests: int) -> float:
    """Embed requests of 64 sentences, all queued at once; requests per second."""
    batch = (SENTENCES * 16)[:64]
    started = time.perf_counter()
    results = [app.send_task(EMBED_TASK, args=[batch]) for _ in range(requests)]
    for result in results:
        result.get(timeout=RESULT_TIMEOUT_S)
    return requests / (time.perf_counter() - started)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=int, default=2000, help="short texts (~20 tokens) per embed_corpus run")
    parser.add_argument("--paragraphs", type=int, default=600, help="paragraph texts (~70 tokens) per run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of 1 thread / all cores")
    parser.add_argument("--requests", type=int, default=20, help="inference requests per throughput sample")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "training.json")
    return parser.parse_args()


def corpora(args: argparse.Namespace) -> dict[str, list[str]]:
    return {
        "short": [f"{SENTENCES[i % 4]} (record {i})" for i in range(args.corpus)],
        "paragraph": [
            f"{' '.join(SENTENCES[i % 4 :] + SENTENCES[: i % 4])} (record {i})" for i in range(args.paragraphs)
        ],
    }


def corpus_seconds(app: Any, texts: dict[str, list[str]], rounds: int, cores: int) -> dict[str, dict[str, list]]:
    """embed_corpus on one thread and on every core, alternated, each kind of text."""
    seconds: dict[str, dict[str, list[float]]] = {kind: {"1": [], str(cores): []} for kind in texts}
    for _ in range(rounds):
        for kind, texts_ in texts.items():
            for threads, queue in (("1", "bench-1-thread"), (str(cores), "bench-all-cores")):
                elapsed, _ = timed(app, EMBED_CORPUS_TASK, queue, texts=texts_, page_size=256)
                seconds[kind][threads].append(elapsed)
    return seconds


def trainer_pools(app: Any, corpus: list[str], rounds: int) -> dict[str, dict[str, list]]:
    """The same job on both trainer pools, alternated, best of `rounds`; a ping while each is busy."""
    pools: dict[str, dict[str, list]] = {}
    for _ in range(rounds):
        for pool, queue, node in (
            ("solo", "bench-all-cores", "all"),
            ("prefork-1", "bench-prefork-trainer", "prefork"),
        ):
            job = app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": corpus, "page_size": 256}, queue=queue)
            started = time.perf_counter()
            time.sleep(1.0)
            replies = app.control.ping(destination=[f"{node}@{socket.gethostname()}"], timeout=2.0)
            job.get(timeout=RESULT_TIMEOUT_S)
            figures = pools.setdefault(pool, {"seconds": [], "answers_ping_while_busy": []})
            figures["seconds"].append(round(time.perf_counter() - started, 2))
            figures["answers_ping_while_busy"].append(bool(replies))
    return pools


def inference_during_training(app: Any, corpus: list[str], requests: int, cores: int) -> dict[str, Any]:
    """Inference throughput alone and while the trainer embeds; the threads each side runs."""
    alone = inference_throughput(app, requests)
    job = app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": corpus * 2}, queue="bench-all-cores")
    time.sleep(1.0)
    infos = [app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S) for _ in range(cores * 2)]
    during = inference_throughput(app, requests)
    job.get(timeout=RESULT_TIMEOUT_S)
    trainer_info = app.send_task(WORKER_INFO_TASK, queue="bench-all-cores").get(timeout=RESULT_TIMEOUT_S)
    return {
        "requests_per_second_alone": round(alone, 2),
        "requests_per_second_during": round(during, 2),
        "child_torch_threads": sorted({info["torch_threads"] for info in infos}),
        "child_os_threads": sorted({info["os_threads"] for info in infos}),
        "trainer_torch_threads": trainer_info["torch_threads"],
    }


def print_report(report: dict[str, Any], best: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    cores = report["cores"]
    print(f"cores: {cores}")
    acc = report["accuracy"]
    print(f"held-out accuracy: trained head {acc['trained_head_held_out']:.3f} vs zero-shot "
          f"{acc['zero_shot_same_split']:.3f} ({acc['examples']['held_out']} held-out texts)")  # fmt: skip
    for kind, figures in report["embed_corpus"].items():
        print(f"embed_corpus {figures['texts']} {kind} texts, best of {args.rounds}: 1 thread "
              f"{best[kind]['1']:.1f} s, {cores} threads {best[kind][str(cores)]:.1f} s -> speed-up "
              f"{figures['speedup_all_cores_vs_1']}x")  # fmt: skip
    for pool, figures in report["trainer_pool"].items():
        print(f"trainer pool {pool}: {args.corpus} short texts, best {min(figures['seconds'])} s "
              f"(runs {figures['seconds']}), "
              f"answers a ping while busy: {figures['answers_ping_while_busy']}")  # fmt: skip
    inf = report["inference_during_training"]
    print(f"inference: {inf['requests_per_second_alone']} req/s alone, {inf['requests_per_second_during']} req/s "
          f"while the trainer embeds; children torch threads {inf['child_torch_threads']}, "
          f"OS threads {inf['child_os_threads']}; trainer torch threads {inf['trainer_torch_threads']}")  # fmt: skip


def main() -> None:
    args = parse_args()
    cores = available_cores()
    work = Path(tempfile.mkdtemp(prefix="bench-training-"))
    server = localstack.start_redis(work / "redis")
    url = server.url(0)
    workers = []
    texts = corpora(args)
    try:
        for name, options in (
            ("single", {"queues": "bench-1-thread", "pool": "solo", "trainer_threads": 1}),
            ("all", {"queues": "bench-all-cores", "pool": "solo", "trainer_threads": cores}),
            ("inference", {"concurrency": cores}),
            ("prefork", {"queues": "bench-prefork-trainer", "concurrency": 1, "profile": "trainer",
                         "trainer_threads": cores}),
        ):  # fmt: skip
            workers.append(localstack.start_worker(name, url, work, os.environ, **options))
        app = workers[0].app
        ticket_texts, labels = dataset()
        train_s, trained = timed(
            app, TRAIN_CLASSIFIER_TASK, "bench-all-cores", name="bench", texts=ticket_texts, labels=labels
        )
        seconds = corpus_seconds(app, texts, args.rounds, cores)
        pools = trainer_pools(app, texts["short"], args.rounds)
        during = inference_during_training(app, texts["short"], args.requests, cores)
    finally:
        for worker in workers:
            worker.stop()
        server.process.terminate()
    best = {kind: {t: min(values) for t, values in runs.items()} for kind, runs in seconds.items()}
    metrics = trained["metrics"]
    report = {
        "cores": cores,
        "accuracy": {
            "trained_head_held_out": metrics["held_out_accuracy"],
            "zero_shot_same_split": metrics["zero_shot_accuracy"],
            "examples": metrics["examples"],
            "train_seconds": round(train_s, 2),
        },
        "embed_corpus": {
            kind: {
                "texts": len(texts[kind]),
                "seconds": seconds[kind],
                "speedup_all_cores_vs_1": round(best[kind]["1"] / best[kind][str(cores)], 2),
            }
            for kind in seconds
        },
        "trainer_pool": pools,
        "inference_during_training": during,
    }
    print_report(report, best, args)
    write_report(args.out, "training", report)


if __name__ == "__main__":
    main()

"""How good the static lane is, and what two-stage retrieval buys back: a static model distilled from the
default model (`inference-tasks distil-model minilm`, 256 dimensions) against the teacher itself, in
process, one thread.

Quality on the repo's data: nearest-centroid labels of data/support_tickets.jsonl (centroids from the
even-numbered tickets, accuracy on the odd ones) and retrieval of data/hybrid_queries.jsonl's 52
queries over the 300 tickets (hit@1: the first ticket is relevant; hit@5: one of the first five; a
ticket is relevant when it holds every phrase the query lists, as benchmarks.hybrid reads them).
Two-stage: the static model's top 50 (or 100) candidates, ordered again by the teacher's vectors of them;
and the static model mapped into the teacher's space (`distil-model --space teacher`, the map fitted on
the default texts and on the even tickets): the teacher's query vector finds the top 50 among the
bridged vectors, the teacher orders them.
Speed: sentences/s of each model on 64-ticket batches, alternated; the pipeline's cost per query
and per indexed document from those, for this corpus and for one of a million documents.

    .venv/bin/python -m benchmarks.static_quality          # ~3 minutes (with the distillations)
    .venv/bin/python -m benchmarks.static_quality --quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT
from tests.support.localstack import clean_env

# Candidates the static model hands the teacher per query: the 50, and 100.
CANDIDATES = (50, 100)
# Candidates the bridged static vectors hand the teacher per query (the teacher's query vector found them).
BRIDGED_CANDIDATES = 50
BATCH = 64
MILLION = 1_000_000


def distilled(cache: Path, *options: str) -> Path:
    environment = clean_env(os.environ, INFERENCE_MODEL_CACHE=str(cache))
    command = [sys.executable, "-m", "inference_tasks.ops.cli", "distil-model", "minilm", *options]
    done = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def bridged_models(cache: Path, tickets: list[str]) -> dict[str, Path]:
    """The static model mapped into the teacher's space (`--space teacher`), its map fitted on the default
    texts (sentences of the packaged corpus's words) and on a sample of the corpus searched here (the even
    tickets, as a user fits it on a sample of what they index: documents only, no query, no label)."""
    sample = cache / "even-tickets.txt"
    sample.write_text("\n".join(tickets[::2]) + "\n")
    return {
        "default texts": distilled(cache, "--space", "teacher"),
        "corpus sample": distilled(cache, "--space", "teacher", "--fit-texts", str(sample), "--name", "sample"),
    }


def bridged_two_stage(bridged: Any, teacher: Any, queries: list[str], tickets: list[str], top: int) -> list[list[int]]:
    """The teacher's query vector against the bridged static vectors of the tickets: its `top`, reordered
    by the teacher's vectors of those alone (the query's vector is the one the first stage used)."""
    query_vectors = teacher.encode(queries, normalize=True)
    first = ranked(query_vectors, bridged.encode(tickets, normalize=True))
    orders = []
    for query_vector, candidates in zip(query_vectors, first, strict=True):
        vectors = teacher.encode([tickets[i] for i in candidates[:top]], normalize=True)
        order = np.argsort(-(vectors @ query_vector), kind="stable")
        orders.append([candidates[i] for i in order])
    return orders


def label_accuracy(vectors: np.ndarray, labels: list[str]) -> float:
    """Nearest centroid: centroids of the even-numbered rows, accuracy on the odd ones."""
    names = sorted(set(labels))
    train, test = range(0, len(labels), 2), range(1, len(labels), 2)
    centroids = np.stack([vectors[[i for i in train if labels[i] == name]].mean(axis=0) for name in names])
    predicted = (vectors[list(test)] @ centroids.T).argmax(axis=1)
    return float(np.mean([names[p] == labels[i] for p, i in zip(predicted, test, strict=True)]))


def hits(rankings: list[list[int]], relevant: list[set[int]]) -> dict[str, float]:
    pairs = list(zip(rankings, relevant, strict=True))
    return {
        "hit@1": float(np.mean([ranking[0] in found for ranking, found in pairs])),
        "hit@5": float(np.mean([bool(set(ranking[:5]) & found) for ranking, found in pairs])),
    }


def ranked(queries: np.ndarray, documents: np.ndarray) -> list[list[int]]:
    return [list(map(int, row)) for row in np.argsort(-(queries @ documents.T), axis=1, kind="stable")]


def two_stage(static: Any, teacher: Any, queries: list[str], tickets: list[str], top: int) -> list[list[int]]:
    """The static model's `top` candidates per query, reordered by the teacher's cosine over those alone."""
    first = ranked(static.encode(queries, normalize=True), static.encode(tickets, normalize=True))
    orders = []
    for query, candidates in zip(queries, first, strict=True):
        vectors = teacher.encode([query, *(tickets[i] for i in candidates[:top])], normalize=True)
        order = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")
        orders.append([candidates[i] for i in order])
    return orders


def speeds(models: dict[str, Any], tickets: list[str], rounds: int) -> dict[str, float]:
    batches = [tickets[start : start + BATCH] for start in range(0, len(tickets) - BATCH + 1, BATCH)]
    seconds = dict.fromkeys(models, 0.0)
    for _, name in alternated(list(models), rounds):
        for batch in batches:
            started = time.perf_counter()
            models[name].encode(batch, normalize=True)
            seconds[name] += time.perf_counter() - started
    return {name: rounds * len(batches) * BATCH / seconds[name] for name in models}


def read_data() -> tuple[list[str], list[str], list[str], list[set[int]]]:
    rows = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").read_text().splitlines()]
    tickets, labels = [row["text"] for row in rows], [row["label"] for row in rows]
    queries = [json.loads(line) for line in (REPO_ROOT / "data" / "hybrid_queries.jsonl").read_text().splitlines()]
    texts = [query["query"] for query in queries]
    phrases = [[phrase.lower() for phrase in query["relevant_if_contains"]] for query in queries]
    relevant = [{i for i, ticket in enumerate(tickets) if all(p in ticket.lower() for p in found)} for found in phrases]
    return tickets, labels, texts, relevant


def quality_rows(teacher: Any, static: Any, bridged: dict[str, Any], data: tuple) -> dict[str, dict[str, float]]:
    tickets, labels, texts, relevant = data
    quality = {}
    for name, model in (("teacher", teacher), ("static", static)):
        vectors = model.encode(tickets, normalize=True)
        quality[name] = {"labels": label_accuracy(vectors, labels)} | hits(
            ranked(model.encode(texts, normalize=True), vectors), relevant
        )
    for top in CANDIDATES:
        quality[f"two-stage {top}"] = hits(two_stage(static, teacher, texts, tickets, top), relevant)
    for fit, model in bridged.items():
        vectors = model.encode(tickets, normalize=True)
        staged = bridged_two_stage(model, teacher, texts, tickets, BRIDGED_CANDIDATES)
        quality[f"bridged, {fit}"] = (
            {"labels": label_accuracy(vectors, labels)}
            | hits(ranked(teacher.encode(texts, normalize=True), vectors), relevant)
            | {"two-stage hit@1": hits(staged, relevant)["hit@1"]}
        )
    return quality


def pipeline_speedups(rate: dict[str, float], queries: int, documents: int) -> dict[str, float]:
    """The teacher alone (every document and query) against each two-stage pipeline's encodes: the first
    stage's documents (and, for the static one, queries), then the teacher's query and candidates."""
    per_text = {name: 1 / value for name, value in rate.items()}
    alone = per_text["teacher"] * (documents + queries)
    static = per_text["static"] * (documents + queries) + per_text["teacher"] * queries * (1 + max(CANDIDATES))
    bridged = per_text["bridged"] * documents + per_text["teacher"] * queries * (1 + BRIDGED_CANDIDATES)
    return {f"static, {max(CANDIDATES)}": alone / static, f"bridged, {BRIDGED_CANDIDATES}": alone / bridged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "static_quality.json")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    data = read_data()
    cache = Path(tempfile.mkdtemp(prefix="bench-static-quality-"))
    static_dir = distilled(cache)
    bridged_dirs = bridged_models(cache, data[0])
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    import torch

    torch.set_num_threads(1)
    from inference_tasks.config.defaults import DEFAULT_MODEL
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.model2vec.static_encoder import StaticEncoder
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    teacher = load_dense_encoder(DEFAULT_MODEL, "cpu", LoadOptions())
    static = StaticEncoder(str(static_dir), static_dir, "cpu")
    bridged = {fit: StaticEncoder(str(path), path, "cpu") for fit, path in bridged_dirs.items()}
    quality = quality_rows(teacher, static, bridged, data)
    models = {"teacher": teacher, "static": static, "bridged": bridged["default texts"]}
    rate = speeds(models, data[0], rounds)
    pipelines = {documents: pipeline_speedups(rate, len(data[2]), documents) for documents in (len(data[0]), MILLION)}
    print(
        f"CPU: {cpu_name()}; one thread; static: {static_dir.name} ({static.dim} dims), bridged {models['bridged'].dim}"
    )
    print(f"{'method':<28} {'labels':>7} {'hit@1':>7} {'hit@5':>7} {'two-stage hit@1':>16}")
    for name, row in quality.items():
        print(f"{name:<28} {row.get('labels', float('nan')):>7.3f} {row['hit@1']:>7.3f} {row['hit@5']:>7.3f} "
              f"{row.get('two-stage hit@1', float('nan')):>16.3f}")  # fmt: skip
    print("sentences/s on 64-ticket batches: " + ", ".join(f"{name} {value:.0f}" for name, value in rate.items()))
    for documents, ratios in pipelines.items():
        print(f"two-stage vs the teacher alone, {documents:,} documents and {len(data[2])} queries: "
              + ", ".join(f"{name} candidates {ratio:.2f}x" for name, ratio in ratios.items()))  # fmt: skip
    speedups = {str(documents): ratios for documents, ratios in pipelines.items()}
    write_report(
        args.out, "static_quality", {"quality": quality, "sentences_per_s": rate, "pipeline_speedup": speedups}
    )


if __name__ == "__main__":
    main()

"""Hybrid search on the repo's tickets: recall@10 of dense (all-MiniLM-L6-v2), sparse (SPLADE-tiny) and
their reciprocal-rank fusion, and sentences/s per core of each model, measured side by side.

The 300 tickets of data/support_tickets.jsonl are the documents; data/hybrid_queries.jsonl holds 52
queries written for this benchmark: 20 paraphrases of a ticket's opening (few words in common: a
dense model's case), 20 keywords, identifiers and rare terms ("order 48213", "VAT receipt": a
lexical model's case) and 12 mixing both ("money taken two times, order 48213": the case hybrid
search is for). A ticket is relevant to a query when it contains every phrase the query lists; a
paraphrase or keyword query has 2-8 relevant tickets, a mixed one 1, so recall@10 is the share of
them in the top 10; MRR@10 (1 / the rank of the first relevant ticket) says how high. Dense scores are
cosines of unit vectors; sparse scores the dot product of SPLADE vectors, as a search engine's
inverted index computes it; the fusion ranks by sum(1 / (60 + rank)) over both top-100 lists (RRF,
k = 60, as OpenSearch, Elasticsearch and Qdrant fuse).

Speed: each model on one thread, the worker's own runtimes (worker/runtimes/torch/loader.py), 64-ticket
batches, rounds alternated A B B A. With `--base-size` also a SPLADE model of BERT-base shape
(naver/splade-v3's and opensearch-neural-sparse-v2's size; random weights: speed only, no recall).

    .venv/bin/python -m benchmarks.hybrid [--quick] [--base-size] [--out benchmarks/results/hybrid.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name, write_report

ROOT = Path(__file__).resolve().parents[1]
TICKETS = ROOT / "data" / "support_tickets.jsonl"
QUERIES = ROOT / "data" / "hybrid_queries.jsonl"
SPLADE_TINY = ROOT / ".models" / "splade-tiny"
TOP = 10
FUSION_DEPTH = 100
RRF_K = 60
BATCH = 64
KINDS = ("all", "paraphrase", "keyword", "mixed")


def reciprocal_rank_fusion(rankings: list[list[int]], k: int = RRF_K) -> list[int]:
    """Documents ordered by sum(1 / (k + rank)) over the rankings (rank from 1); ties: the lower index."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, document in enumerate(ranking, start=1):
            scores[document] = scores.get(document, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda document: (-scores[document], document))


def recall_at(found: list[int], relevant: set[int], top: int = TOP) -> float:
    return len(set(found[:top]) & relevant) / len(relevant)


def reciprocal_rank(found: list[int], relevant: set[int], top: int = TOP) -> float:
    return next((1.0 / rank for rank, document in enumerate(found[:top], start=1) if document in relevant), 0.0)


def dense_matrix(rows: list[Any], width: int) -> Any:
    """SparseRows as a (texts, vocabulary) float32 matrix: 300 tickets x 30,522 is 37 MB."""
    import numpy as np

    matrix = np.zeros((len(rows), width), dtype=np.float32)
    for index, row in enumerate(rows):
        matrix[index, row.indices] = row.values
    return matrix


def rankings(scores: Any) -> list[list[int]]:
    import numpy as np

    return [list(map(int, row)) for row in np.argsort(-scores, axis=1, kind="stable")[:, :FUSION_DEPTH]]


def recall_table(dense: Any, sparse: Any, tickets: list[str], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """recall@10 per method, over every query and per kind of query."""
    texts = [query["query"] for query in queries]
    found = {
        "dense": rankings(dense.encode(texts, normalize=True) @ dense.encode(tickets, normalize=True).T),
        "sparse": rankings(dense_matrix(sparse.encode_sparse(texts), sparse.dim)
                           @ dense_matrix(sparse.encode_sparse(tickets), sparse.dim).T),
    }  # fmt: skip
    found["fusion"] = [
        reciprocal_rank_fusion([d, s]) for d, s in zip(found["dense"], found["sparse"], strict=True)
    ]  # fmt: skip
    table: dict[str, Any] = {}
    for method, ranked in found.items():
        scores = []
        for query, ranking in zip(queries, ranked, strict=True):
            phrases = [phrase.lower() for phrase in query["relevant_if_contains"]]
            relevant = {i for i, text in enumerate(tickets) if all(p in text.lower() for p in phrases)}
            scores.append((query["kind"], recall_at(ranking, relevant), reciprocal_rank(ranking, relevant)))
        table[method] = {kind: _mean([score for k, score, _ in scores if kind in ("all", k)]) for kind in KINDS}
        table[method]["mrr"] = _mean([rank for _, _, rank in scores])
    return table


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def speeds(models: dict[str, Any], tickets: list[str], rounds: int) -> dict[str, float]:
    """Sentences/s of each model on one thread over the same 64-ticket batches, rounds alternated."""
    batches = [tickets[start : start + BATCH] for start in range(0, len(tickets) - BATCH + 1, BATCH)]
    seconds = dict.fromkeys(models, 0.0)
    texts = dict.fromkeys(models, 0)
    for model in models.values():  # warm-up, not timed
        run(model, batches[0][:4])
    for _, name in alternated(list(models), rounds):
        for batch in batches:
            started = time.perf_counter()
            run(models[name], batch)
            seconds[name] += time.perf_counter() - started
            texts[name] += len(batch)
    return {name: texts[name] / seconds[name] for name in models}


def run(model: Any, texts: list[str]) -> None:
    """One pass: sparse rows from a sparse encoder, vectors from a dense one (capabilities.py)."""
    if hasattr(model, "encode_sparse"):
        model.encode_sparse(texts)
    else:
        model.encode(texts, normalize=True)


def base_size_splade(tmp: Path) -> Path:
    """A BertForMaskedLM of BERT-base shape (12 layers, 768 wide, BERT's vocabulary) with random weights,
    saved beside SPLADE-tiny's tokenizer: what a production SPLADE model costs per text."""
    import shutil

    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072)  # fmt: skip
    BertForMaskedLM(config).save_pretrained(tmp)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(SPLADE_TINY / name, tmp / name)
    return tmp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one timed round (a smoke run)")
    parser.add_argument("--base-size", action="store_true", help="also time a BERT-base-sized SPLADE model")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hybrid.json")
    options = parser.parse_args()
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    import torch

    torch.set_num_threads(1)
    from inference_tasks.config.defaults import DEFAULT_MODEL
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.registry import load_dense_encoder
    from inference_tasks.worker.runtimes.torch.loader import load_sparse_encoder

    tickets = [json.loads(line)["text"] for line in TICKETS.read_text().splitlines() if line.strip()]
    queries = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    dense = load_dense_encoder(DEFAULT_MODEL, "cpu", LoadOptions())
    sparse = load_sparse_encoder(str(SPLADE_TINY), "cpu")
    recall = recall_table(dense, sparse, tickets, queries)
    models = {"dense all-MiniLM-L6-v2": dense, "sparse SPLADE-tiny": sparse}
    if options.base_size:
        import tempfile

        base = base_size_splade(Path(tempfile.mkdtemp(prefix="splade-base-")))
        models["sparse BERT-base SPLADE shape"] = load_sparse_encoder(str(base), "cpu")
    per_second = speeds(models, tickets, 1 if options.quick else 4)
    counts = ", ".join(f"{sum(q['kind'] == kind for q in queries)} {kind}" for kind in KINDS[1:])
    print(f"CPU: {cpu_name()}; one thread; {len(tickets)} tickets, {len(queries)} queries ({counts})")
    print(f"\n{'method':<8} {'recall@10':>9} {'paraphrase':>10} {'keyword':>8} {'mixed':>6} {'MRR@10':>7}")
    for method, row in recall.items():
        print(f"{method:<8} {row['all']:>9.3f} {row['paraphrase']:>10.3f} {row['keyword']:>8.3f} "
              f"{row['mixed']:>6.3f} {row['mrr']:>7.3f}")  # fmt: skip
    print(f"\n{'model':<32} {'sentences/s per core':>20}")
    for name, rate in per_second.items():
        print(f"{name:<32} {rate:>20.1f}")
    write_report(options.out, "hybrid", {"recall_at_10": recall, "sentences_per_s_one_thread": per_second})


if __name__ == "__main__":
    main()

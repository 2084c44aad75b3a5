"""Quantized vectors against floats: retrieval quality and bytes per vector, for every encoding and a few
Matryoshka dimensions, on the repo's labelled support tickets, with the worker's own code paths
(calibration ranges from the shipped corpus, sentence-transformers' quantization semantics).

Each of the 300 tickets is a query against the other 299. recall@10: the share of the float
vectors' top 10 (cosine) that the quantized search also returns in its top 10. label P@10: the share
of the top 10 with the query's label (the labelled ground truth), for floats and for each encoding.
Quantized search scores as a vector database does: int8/uint8 by the dot product of the integer
vectors, binary/ubinary by Hamming distance (fewest differing bits first).

    .venv/bin/python -m benchmarks.quantized
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from benchmarks.harness.report import cpu_name

TICKETS = Path(__file__).resolve().parents[1] / "data" / "support_tickets.jsonl"
TOP = 10


def top_k(scores: np.ndarray) -> np.ndarray:
    scores = scores.astype(np.float64)
    np.fill_diagonal(scores, -np.inf)
    return np.argsort(-scores, axis=1, kind="stable")[:, :TOP]


def search(vectors: np.ndarray, encoding: str) -> np.ndarray:
    if encoding in ("binary", "ubinary"):
        bits = np.unpackbits(vectors.view(np.uint8), axis=1).astype(np.int32)
        return top_k(-(bits[:, None, :] != bits[None, :, :]).sum(axis=2))
    values = vectors.astype(np.int64)
    if encoding == "uint8":  # unsigned: every value positive, so a dot product rewards magnitude; L2 does not
        squares = (values**2).sum(axis=1)
        return top_k(-(squares[:, None] + squares[None, :] - 2 * values @ values.T))
    return top_k(values @ values.T)


def main() -> None:
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    from inference_tasks.ml.corpus import corpus_texts
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.registry import load_dense_encoder
    from inference_tasks.worker.tasks.vectors import quantize, shaped

    tickets = [json.loads(line) for line in TICKETS.read_text().splitlines() if line.strip()]
    texts, labels = [t["text"] for t in tickets], np.array([t["label"] for t in tickets])
    encoder = load_dense_encoder("all-MiniLM-L6-v2", "cpu", LoadOptions())
    floats = encoder.encode(texts, normalize=True)
    calibration = encoder.encode(corpus_texts(), normalize=True)
    print(f"CPU: {cpu_name()}; all-MiniLM-L6-v2 (torch); {len(texts)} labelled tickets, each a query against the rest")
    print(f"{'dims':>5} {'encoding':<10} {'bytes':>6} {'recall@10':>10} {'label P@10':>11}")
    for dims in (384, 256, 128, 64):
        base = shaped(floats.copy(), dims, True)
        reference = top_k(base @ base.T)
        ranges_of = shaped(calibration.copy(), dims, True)
        ranges = np.vstack((ranges_of.min(axis=0), ranges_of.max(axis=0)))
        for encoding in ("float32", "int8", "uint8", "binary", "ubinary"):
            if encoding == "float32":
                found, size = reference, dims * 4
            else:
                packed = quantize(base, encoding, ranges)
                found, size = search(packed, encoding), packed.shape[1]
            recall = np.mean([len(set(a) & set(b)) / TOP for a, b in zip(found, reference, strict=True)])
            precision = np.mean(labels[found] == labels[:, None])
            print(f"{dims:>5} {encoding:<10} {size:>6} {recall:>10.3f} {precision:>11.3f}")


if __name__ == "__main__":
    main()

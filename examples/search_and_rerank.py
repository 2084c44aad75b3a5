"""Semantic search and reranking from Python: long documents in chunks, compact int8 vectors for the
index, a query's candidates reranked, and what each request cost.

Run against a worker on the configured Redis (REDIS_URL, default redis://127.0.0.1:6379/0):
    python examples/search_and_rerank.py
"""

from __future__ import annotations

import numpy as np

from inference_tasks import app, client

TIMEOUT_S = 120
DOCUMENTS = [
    "Refunds. If you were charged twice, the second charge is refunded automatically within five "
    "business days. Invoices list every charge with its VAT number; contact billing to correct one.",
    "Passwords. To reset your password, click 'Forgot password' on the sign-in page. The email comes "
    "from no-reply@example.com; check your spam folder if it does not arrive within ten minutes.",
    "Exports. Reports export to PDF and CSV from the Share menu. A blank PDF usually means the report "
    "is still loading; wait for the charts to render, then export again.",
]
QUERY = "I paid twice this month, when do I get my money back?"


def main() -> None:
    # 1. Index: each document in windows the model reads whole, with their character spans.
    chunked = client.embed_chunks(app, DOCUMENTS, chunk_tokens=32, overlap_tokens=8, timeout=TIMEOUT_S)
    passages, vectors = [], []
    for document, chunks in zip(DOCUMENTS, chunked["chunks"], strict=True):
        for chunk in chunks:
            passages.append(document[chunk["start"] : chunk["end"]])
            vectors.append(chunk["embedding"])
    index = np.stack(vectors)
    print(f"{len(passages)} passages from {len(DOCUMENTS)} documents, {chunked['usage']['tokens']} tokens")

    # The same vectors as int8 take a quarter of the bytes (calibrated per model, not per batch).
    compact = client.embed(app, passages, encoding="int8", timeout=TIMEOUT_S)["embeddings"]
    print(f"int8 index: {compact.nbytes} bytes instead of {index.nbytes}")

    # 2. Search: the query's nearest passages, then rerank the candidates.
    query = client.embed(app, [QUERY], timeout=TIMEOUT_S)["embeddings"][0]
    candidates = [passages[i] for i in np.argsort(-(index @ query))[:4]]
    ranked = client.rerank(app, QUERY, candidates, top_n=2, return_documents=True, timeout=TIMEOUT_S)
    print(f"reranked ({ranked['method']}, {ranked['usage']['inference_ms']:.1f} ms of compute, "
          f"{ranked['usage']['queue_ms']} ms queued):")  # fmt: skip
    for item in ranked["results"]:
        print(f"  {item['score']:.3f}  {item['document']}")


if __name__ == "__main__":
    main()

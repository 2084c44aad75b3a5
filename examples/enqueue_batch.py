"""Enqueue a batch from Python the way any producer would, and print what comes back.

Run against a worker on the configured Redis (REDIS_URL, default redis://127.0.0.1:6379/0):
    python examples/enqueue_batch.py
"""

from __future__ import annotations

import sys
import time

from inference_tasks import app, producer
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK

WORKER_WAIT_S = 180
RESULT_TIMEOUT_S = 120

TEXTS = [
    "I was charged twice for my subscription this month.",
    "The app crashes every time I open the settings page.",
    "Can I upgrade my plan to add five more seats?",
    "How do I reset my password? The email never arrives.",
    "Your invoice shows the wrong VAT number for our company.",
    "After the last update, exporting to PDF produces a blank file.",
]
LABELS = ["billing", "bug report", "sales", "account access"]


def wait_for_worker() -> None:
    """Block until at least one worker answers a ping (it loads the model before it does)."""
    deadline = time.monotonic() + WORKER_WAIT_S
    while not app.control.ping(timeout=1.0):
        if time.monotonic() > deadline:
            sys.exit(f"no worker answered within {WORKER_WAIT_S} s; see .run/worker.log")
    print("worker is up")


def main() -> None:
    wait_for_worker()
    started = time.perf_counter()
    # producer.collect deletes each result once read: results nobody deletes fill Redis.
    embedded = producer.collect(producer.send(app, EMBED_TASK, args=[TEXTS]), RESULT_TIMEOUT_S)
    vectors = embedded["embeddings"]
    print(f"embed: {len(vectors)} x {embedded['dim']} embeddings from {embedded['model']} "
          f"in {time.perf_counter() - started:.2f} s")  # fmt: skip
    predictions = producer.collect(producer.send(app, CLASSIFY_TASK, args=[TEXTS, LABELS]), RESULT_TIMEOUT_S)
    print("classify (zero-shot):")
    for text, prediction in zip(TEXTS, predictions, strict=True):
        print(f"  {prediction['label']:<15} {prediction['score']:.3f}  {text}")


if __name__ == "__main__":
    main()

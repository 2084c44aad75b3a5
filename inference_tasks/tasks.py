"""The public tasks: validate the request, ask the holder for the model, return plain JSON."""

from __future__ import annotations

import os
from typing import Any

from celery import Task, shared_task

from inference_tasks import threads
from inference_tasks.models import HOLDER
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, WORKER_INFO_TASK
from inference_tasks.validation import (
    InvalidInput,
    check_flag,
    check_labels,
    check_texts,
    reject_unknown,
)

# Bad input is an expected outcome: Celery records FAILURE without a traceback in the log.
EXPECTED_ERRORS = (InvalidInput,)


@shared_task(name=EMBED_TASK, bind=True, throws=EXPECTED_ERRORS)
def embed(self: Task, texts: Any = None, normalize: Any = True, **unknown: Any) -> dict[str, Any]:
    """Embed a batch: {"model", "dim", "embeddings": [[float] per text, in input order]}."""
    reject_unknown(EMBED_TASK, unknown, ("texts", "normalize"))
    texts = check_texts(EMBED_TASK, texts, self.app.settings)
    normalize = check_flag(EMBED_TASK, "normalize", normalize)
    model = HOLDER.get()
    vectors = model.encode(texts, normalize=normalize)
    return {"model": model.name, "dim": model.dim, "embeddings": vectors.tolist()}


@shared_task(name=CLASSIFY_TASK, bind=True, throws=EXPECTED_ERRORS)
def classify(self: Task, texts: Any = None, labels: Any = None, **unknown: Any) -> list[dict[str, Any]]:
    """Zero-shot: each text gets the label whose embedding is most cosine-similar to its own.

    One {"label", "score", "scores": {label: cosine}} per text, in input order; a trained
    classifier head returns the same shape, with probabilities as scores.
    """
    reject_unknown(CLASSIFY_TASK, unknown, ("texts", "labels"))
    settings = self.app.settings
    texts = check_texts(CLASSIFY_TASK, texts, settings)
    labels = check_labels(CLASSIFY_TASK, labels, settings)
    model = HOLDER.get()
    similarities = model.encode(texts, normalize=True) @ HOLDER.label_embeddings(labels).T
    return [predictions(labels, row.tolist()) for row in similarities]


def predictions(labels: list[str], scores: list[float]) -> dict[str, Any]:
    """One text's result: the best label, its score, and every label's score."""
    best = max(range(len(labels)), key=scores.__getitem__)
    return {
        "label": labels[best],
        "score": scores[best],
        "scores": dict(zip(labels, scores, strict=True)),
    }


@shared_task(name=WORKER_INFO_TASK, bind=True, throws=EXPECTED_ERRORS)
def worker_info(self: Task, **unknown: Any) -> dict[str, Any]:
    """What the process that ran this task is: model, threads as the OS and libraries see them, RSS.

    Works in a child whose model failed to load, so operators can see why.
    """
    reject_unknown(WORKER_INFO_TASK, unknown, ())
    model = HOLDER.embedder
    parent_pid = os.getppid()
    return {
        "hostname": self.request.hostname,
        "pid": os.getpid(),
        "profile": HOLDER.profile,
        "model": model.name if model else None,
        "model_error": HOLDER.error,
        "device": model.device if model else None,
        "dim": model.dim if model else None,
        "model_load_seconds": HOLDER.load_seconds,
        "warmup_seconds": HOLDER.warmup_seconds,
        "parent_import_seconds": HOLDER.import_seconds,
        "thread_budget": HOLDER.threads,
        "tasks_served": HOLDER.tasks_served,
        "rss_bytes": threads.rss_bytes(),
        **threads.thread_report(),
        "parent": {"pid": parent_pid, "os_threads": threads.os_thread_count(parent_pid)},
        "redis_url": self.app.settings.redacted_redis_url,
    }

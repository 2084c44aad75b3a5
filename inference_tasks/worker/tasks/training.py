"""The trainer profile's tasks (one process, all cores): train classifier heads, embed corpora.

Both tasks are routed to the `training` queue. They embed in chunks and report progress as the
custom state PROGRESS (meta: stage, done, total), stored in the result backend for pollers and
sent as a `task-progress` event for Flower. The fitting itself is ml/training.py.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from celery import Task, shared_task

from inference_tasks import codec
from inference_tasks.contract.specs import EMBED_CORPUS, TRAIN_CLASSIFIER
from inference_tasks.ml import store
from inference_tasks.ml.training import TRAIN_EPOCHS, accuracy, fit_softmax_head, stratified_split
from inference_tasks.redis_access.connections import broker_redis, result_redis
from inference_tasks.redis_access.keys import corpus_page_key
from inference_tasks.routing import (
    EMBED_CORPUS_TASK,
    JSON_ENCODING,
    TRAIN_CLASSIFIER_TASK,
)
from inference_tasks.validation import InvalidInput, check_text_items, check_training_labels
from inference_tasks.worker.celery_ext.request import GuardedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.tasks.steps import EXPECTED_ERRORS

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder

PROGRESS = "PROGRESS"
EMBED_CHUNK = 64


def report_progress(task: Task, stage: str, done: int, total: int) -> None:
    """PROGRESS state for pollers, and an event for Flower (update_state sends none)."""
    meta = {"stage": stage, "done": done, "total": total}
    if task.request.id:
        task.update_state(state=PROGRESS, meta=meta)
        task.send_event("task-progress", **meta)


def embed_in_chunks(task: Task, model: DenseEncoder, texts: list[str], stage: str) -> np.ndarray:
    """Unit-norm embeddings of `texts` by `model`, reporting progress after each chunk."""
    parts = []
    for start in range(0, len(texts), EMBED_CHUNK):
        parts.append(model.encode(texts[start : start + EMBED_CHUNK], normalize=True))
        report_progress(task, stage, min(start + EMBED_CHUNK, len(texts)), len(texts))
    return np.concatenate(parts).astype(np.float32)


def decode_items(task: str, items: list[bytes], offset: int) -> list[str]:
    """Redis list items as text; a non-UTF-8 item is bad input, named by its index."""
    texts = []
    for position, item in enumerate(items):
        try:
            texts.append(item.decode("utf-8"))
        except UnicodeDecodeError:
            raise InvalidInput(f"{task}: texts[{offset + position}] in the source list is not UTF-8 text") from None
    return texts


def head_metrics(
    head: store.ClassifierHead, embeddings: np.ndarray, targets: np.ndarray, labels: list[str], split: tuple[Any, Any]
) -> dict[str, Any]:
    """Held-out and train accuracy, zero-shot accuracy on the same held-out texts (the labels as
    candidates), and the examples per label on each side of the split."""
    train, test = split
    zero_shot = embeddings[test] @ current().model.label_embeddings(head.labels).T
    return {
        "held_out_accuracy": accuracy(head.probabilities(embeddings[test]).argmax(axis=1), targets[test]),
        "train_accuracy": accuracy(head.probabilities(embeddings[train]).argmax(axis=1), targets[train]),
        "zero_shot_accuracy": accuracy(zero_shot.argmax(axis=1), targets[test]),
        "examples": {"train": len(train), "held_out": len(test)},
        "per_label": {
            label: {"train": count, "held_out": Counter(labels[i] for i in test)[label]}
            for label, count in sorted(Counter(labels[i] for i in train).items())
        },
    }


@shared_task(name=TRAIN_CLASSIFIER_TASK, bind=True, base=GuardedTask, throws=EXPECTED_ERRORS)
def train_classifier(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Train a softmax head on embeddings of labelled texts and store it as the next version of `name`
    (contract/specs.py's TRAIN_CLASSIFIER).

    Returns the stored version and metrics: held-out accuracy, zero-shot accuracy on the same split
    (the labels as zero-shot candidates), per-label counts, and timings.
    """
    task = TRAIN_CLASSIFIER_TASK
    settings = self.app.settings
    request = TRAIN_CLASSIFIER.parse(args, kwargs, settings)
    name, texts, alias = request["name"], request["texts"], request["model"]
    labels = check_training_labels(task, request["labels"], len(texts), settings)
    test_fraction, seed = request["test_fraction"], request["seed"]
    model = current().model.dense(task, alias)

    started = time.perf_counter()
    embeddings = embed_in_chunks(self, model, texts, "embedding")
    embedded = time.perf_counter()
    names = sorted(set(labels))
    targets = np.array([names.index(label) for label in labels], dtype=np.int64)
    train, test = stratified_split(labels, test_fraction, seed)
    weights, bias = fit_softmax_head(
        embeddings[train],
        targets[train],
        len(names),
        lambda epoch: report_progress(self, "training", epoch, TRAIN_EPOCHS),
    )
    fitted = time.perf_counter()
    head = store.ClassifierHead(
        name=name,
        model=model.name,
        labels=names,
        weights=weights,
        bias=bias,
        backend=model.backend,
        precision=model.precision,
    )
    head.metrics = {
        **head_metrics(head, embeddings, targets, labels, (train, test)),
        "embed_seconds": round(embedded - started, 3),
        "fit_seconds": round(fitted - embedded, 3),
        "threads": current().process.threads,
    }
    version = store.save_head(broker_redis(settings), head)
    return {
        "name": name,
        "version": version,
        "model": model.name,
        "alias": alias,
        "backend": head.backend,
        "precision": head.precision,
        "labels": names,
        "metrics": head.metrics,
    }


@shared_task(name=EMBED_CORPUS_TASK, bind=True, base=GuardedTask, throws=EXPECTED_ERRORS)
def embed_corpus(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Embed a large corpus page by page into Redis; the result says where the pages are (contract/specs.py's
    EMBED_CORPUS).

    Input is `texts` (a list, bounded by the message size) or `source_key` (a Redis list of texts,
    read page by page). Each page of embeddings is written to `inference-tasks:corpus:<task id>:<n>`
    as JSON {page, start, count, dim, encoding, embeddings} and expires after
    INFERENCE_CORPUS_EXPIRES_S; at most one page is in memory at a time.
    """
    task = EMBED_CORPUS_TASK
    settings = self.app.settings
    request = EMBED_CORPUS.parse(args, kwargs, settings)
    texts, source_key, alias = request["texts"], request["source_key"], request["model"]
    page_size, normalize, encoding = request["page_size"], request["normalize"], request["encoding"]
    if (texts is None) == (source_key is None):
        raise InvalidInput(f"{task}: give exactly one of texts (a list) or source_key (a Redis list key)")
    client = broker_redis(settings)
    total = len(texts) if texts is not None else _source_length(client, source_key, settings.max_corpus_texts)
    model = current().model.dense(task, alias)
    job_id = self.request.id or "local"
    pages = 0
    for start in range(0, total, page_size):
        if texts is not None:
            page = texts[start : start + page_size]
        else:
            items = cast(list[bytes], client.lrange(source_key, start, start + page_size - 1))  # a bytes client
            page = decode_items(task, items, start)
            check_text_items(task, page, settings, offset=start)
        vectors = model.encode(page, normalize=normalize)
        record = {"page": pages, "start": start, "count": len(page), "dim": model.dim, "encoding": encoding}
        record["embeddings"] = vectors.tolist() if encoding == JSON_ENCODING else codec.encode_vectors(vectors)
        # Pages are results: on INFERENCE_RESULT_REDIS_URL when set (the source list is the broker's).
        result_redis(settings).set(corpus_page_key(job_id, pages), json.dumps(record), ex=settings.corpus_expires_s)
        pages += 1
        report_progress(self, "embedding", min(start + page_size, total), total)
    return {
        "job_id": job_id,
        "model": model.name,
        "alias": alias,
        "dim": model.dim,
        "count": total,
        "page_size": page_size,
        "encoding": encoding,
        "pages": pages,
        "page_key": corpus_page_key(job_id, "{page}"),
        "expires_s": settings.corpus_expires_s,
    }


def _source_length(client: Any, source_key: Any, most: int) -> int:
    """How many texts the `source_key` list holds; a missing, empty or too long one fails the task."""
    if not isinstance(source_key, str) or not source_key:
        raise InvalidInput(f"{EMBED_CORPUS_TASK}: source_key must be the name of a Redis list")
    total = int(client.llen(source_key))
    if not 0 < total <= most:
        raise InvalidInput(
            f"{EMBED_CORPUS_TASK}: Redis list {source_key!r} holds {total} texts; it must hold 1 to "
            f"{most} (INFERENCE_MAX_CORPUS_TEXTS)"
        )
    return total

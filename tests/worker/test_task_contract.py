"""The public task contract, smoke-tested through pytest-celery's `celery_setup`: every wire name answers
on its queue, through the real worker processes (tests/support/celery_nodes.py adapts them; no Docker)."""

from __future__ import annotations

import json
import uuid

import pytest

from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_CORPUS_TASK,
    EMBED_TASK,
    INFERENCE_QUEUE,
    TRAIN_CLASSIFIER_TASK,
    TRAINING_QUEUE,
    WORKER_INFO_TASK,
)
from tests.support.local import redis_client
from tests.support.localstack import REPO_ROOT

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
TICKETS = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").open(encoding="utf-8")]


def test_celery_setup_runs_over_our_own_redis_and_workers(celery_setup):
    """celery_setup is ready (each node's process alive, Redis answering, each worker logged 'ready'),
    both workers answer a control ping under the node names the setup reports, on the queues it names."""
    assert celery_setup.ready(control=True)
    assert [worker.worker_queue for worker in celery_setup.worker_cluster] == [INFERENCE_QUEUE, TRAINING_QUEUE]
    names = {worker.hostname() for worker in celery_setup.worker_cluster}
    replies = celery_setup.app.control.ping(destination=sorted(names), timeout=5)
    assert {name for reply in replies for name in reply} == names
    broker_url = celery_setup.app.conf.broker_url
    assert celery_setup.broker.config()["url"] == celery_setup.backend.config()["url"] == broker_url


def test_every_public_task_answers_on_its_queue(celery_setup):
    """embed, classify and worker_info on the inference worker; train_classifier, embed_corpus and
    worker_info on the trainer: each result has its documented shape, the worker that ran it logged
    its success, and its result key lives an hour at most (inference) or a day (training)."""
    app = celery_setup.app
    inference, trainer = celery_setup.worker_cluster
    texts = [row["text"] for row in TICKETS[:40]]
    labels = [row["label"] for row in TICKETS[:40]]
    training = {"name": f"contract-{uuid.uuid4().hex[:8]}", "texts": texts, "labels": labels}
    sent = {
        EMBED_TASK: (inference, app.send_task(EMBED_TASK, args=[texts[:2]])),
        CLASSIFY_TASK: (inference, app.send_task(CLASSIFY_TASK, args=[texts[:1], ["billing", "shipping"]])),
        WORKER_INFO_TASK: (inference, app.send_task(WORKER_INFO_TASK)),
        "trainer " + WORKER_INFO_TASK: (trainer, app.send_task(WORKER_INFO_TASK, queue=TRAINING_QUEUE)),
        TRAIN_CLASSIFIER_TASK: (trainer, app.send_task(TRAIN_CLASSIFIER_TASK, kwargs=training)),
        EMBED_CORPUS_TASK: (trainer, app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": texts[:10], "page_size": 4})),
    }
    values = {name: result.get(timeout=RESULT_TIMEOUT_S) for name, (_, result) in sent.items()}
    assert len(values[EMBED_TASK]["embeddings"]) == 2 and values[EMBED_TASK]["dim"] == 384
    assert values[CLASSIFY_TASK][0]["label"] in ("billing", "shipping")
    assert values[WORKER_INFO_TASK]["profile"] == "inference"
    assert values["trainer " + WORKER_INFO_TASK]["profile"] == "trainer"
    assert values[TRAIN_CLASSIFIER_TASK]["version"] == 1
    assert (values[EMBED_CORPUS_TASK]["count"], values[EMBED_CORPUS_TASK]["pages"]) == (10, 3)
    for name, (node, result) in sent.items():
        node.assert_log_exists(f"Task {name.split()[-1]}[{result.id}] succeeded", timeout=30)
    # Lifetimes: inference results an hour at most, training results a day (result_backend.py).
    redis = redis_client(app.conf.broker_url)
    ttl = {name: redis.ttl(f"celery-task-meta-{result.id}") for name, (_, result) in sent.items()}
    assert all(0 < ttl[name] <= 3600 for name in (EMBED_TASK, CLASSIFY_TASK, WORKER_INFO_TASK)), ttl
    assert all(3600 < ttl[name] <= 86400 for name in (TRAIN_CLASSIFIER_TASK, EMBED_CORPUS_TASK)), ttl

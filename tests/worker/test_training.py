"""Training and bulk work on the trainer profile, used by pinned inference workers: real processes throughout."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from inference_tasks import codec
from inference_tasks.ml import store
from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_CORPUS_TASK,
    EMBED_TASK,
    TRAIN_CLASSIFIER_TASK,
    TRAINING_QUEUE,
    WORKER_INFO_TASK,
)
from tests.support.events import EventRecorder
from tests.support.local import redis_client
from tests.support.tickets import dataset
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 180
CLEAR_EXAMPLES = {
    "I was charged twice for my subscription and need a refund.": "billing",
    "The app crashes every time I open the settings page.": "bug_report",
    "The password reset email never arrives, I cannot log in.": "account_access",
    "Could you add an export to Excel for reports?": "feature_request",
    "My parcel has not arrived and the tracking number does not work.": "shipping",
}


@pytest.fixture(scope="module")
def stack(start_worker):
    """A pinned inference worker (2 children) and a trainer (solo, 2 threads) sharing one Redis."""
    inference = start_worker(concurrency=2)
    trainer = start_worker(queues=TRAINING_QUEUE, pool="solo", trainer_threads=2, redis_url=inference.redis_url)
    return inference, trainer


def train(app, name: str, texts, labels, **kwargs):
    return app.send_task(TRAIN_CLASSIFIER_TASK, kwargs={"name": name, "texts": texts, "labels": labels, **kwargs})


def test_a_trained_head_is_stored_beats_zero_shot_and_reports_progress(stack):
    """Training on data/support_tickets.jsonl stores version 1 in Redis, reports PROGRESS while it
    runs, beats zero-shot on the same held-out split, and inference children stay at 1 thread meanwhile."""
    inference, _ = stack
    texts, labels = dataset()
    with EventRecorder(inference.app) as recorder:
        result = train(inference.app, "support", texts, labels)
        # Inference children answer (pinned) while the trainer is busy.
        infos = [inference.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S) for _ in range(4)]
        outcome = result.get(timeout=RESULT_TIMEOUT_S)
        wait_until(lambda: recorder.of_type("task-succeeded", result.id), 30, "the training's task-succeeded event")
    progress = recorder.of_type("task-progress", result.id)
    stages = [event["stage"] for event in progress]
    assert "embedding" in stages and "training" in stages, stages
    embedding = [event for event in progress if event["stage"] == "embedding"]
    assert [event["done"] for event in embedding] == sorted(event["done"] for event in embedding)
    assert embedding[-1]["done"] == embedding[-1]["total"] == len(texts)
    assert all(info["torch_threads"] == 1 and info["thread_budget"] == 1 for info in infos)
    assert outcome["version"] == 1 and outcome["model"] == "all-MiniLM-L6-v2"
    metrics = outcome["metrics"]
    assert metrics["held_out_accuracy"] >= 0.9, metrics
    assert metrics["held_out_accuracy"] > metrics["zero_shot_accuracy"], metrics
    assert metrics["examples"] == {"train": 240, "held_out": 60}
    assert sum(c["held_out"] for c in metrics["per_label"].values()) == 60
    assert metrics["threads"] == 2
    head = store.load_head(redis_client(inference.redis_url), "support")
    assert head.version == 1 and head.model == "all-MiniLM-L6-v2" and head.weights.shape == (5, 384)
    assert head.metrics == metrics


def test_inference_workers_classify_with_the_stored_head(stack):
    """classify(classifier=name) on the pinned workers: the obvious labels, probabilities as scores."""
    inference, trainer = stack
    if store.latest_version(redis_client(inference.redis_url), "support") is None:
        texts, labels = dataset()
        train(trainer.app, "support", texts, labels).get(timeout=RESULT_TIMEOUT_S)
    predictions = inference.app.send_task(
        CLASSIFY_TASK, args=[list(CLEAR_EXAMPLES)], kwargs={"classifier": "support"}
    ).get(timeout=RESULT_TIMEOUT_S)
    assert [p["label"] for p in predictions] == list(CLEAR_EXAMPLES.values())
    for prediction in predictions:
        assert abs(sum(prediction["scores"].values()) - 1.0) < 1e-4
        assert prediction["score"] == max(prediction["scores"].values())


def test_a_newer_version_is_picked_up_without_restarting_workers(stack):
    """Training the same name again stores v2; the running inference children switch to it on their
    next task, and v1 stays retrievable with classifier_version."""
    inference, trainer = stack
    texts, labels = dataset()
    binary = ["shipping" if label == "shipping" else "other" for label in labels]
    name = "shipping-or-not"
    v1 = train(trainer.app, name, texts, labels).get(timeout=RESULT_TIMEOUT_S)
    children_before = set(inference.child_pids())
    ask = inference.app.send_task(CLASSIFY_TASK, args=[list(CLEAR_EXAMPLES)], kwargs={"classifier": name})
    assert {p["label"] for p in ask.get(timeout=RESULT_TIMEOUT_S)} == set(CLEAR_EXAMPLES.values())
    v2 = train(trainer.app, name, texts, binary).get(timeout=RESULT_TIMEOUT_S)
    assert (v1["version"], v2["version"]) == (1, 2)
    for _ in range(4):  # reach both children, whichever cached v1
        ask = inference.app.send_task(CLASSIFY_TASK, args=[list(CLEAR_EXAMPLES)], kwargs={"classifier": name})
        labels_now = [p["label"] for p in ask.get(timeout=RESULT_TIMEOUT_S)]
        assert labels_now == ["other", "other", "other", "other", "shipping"]
    pinned = inference.app.send_task(
        CLASSIFY_TASK, args=[list(CLEAR_EXAMPLES)], kwargs={"classifier": name, "classifier_version": 1}
    ).get(timeout=RESULT_TIMEOUT_S)
    assert [p["label"] for p in pinned] == list(CLEAR_EXAMPLES.values())
    assert set(inference.child_pids()) == children_before


def test_the_trainer_runs_many_threads_while_inference_children_run_one(stack):
    """worker_info on each queue: the trainer (one process) has 2 native threads per pool, the
    inference children 1."""
    inference, trainer = stack
    trainer_info = inference.app.send_task(WORKER_INFO_TASK, queue=TRAINING_QUEUE).get(timeout=RESULT_TIMEOUT_S)
    child_info = inference.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert trainer_info["profile"] == "trainer" and trainer_info["pid"] == trainer.process.pid
    assert trainer_info["torch_threads"] == 2
    assert max(pool["num_threads"] for pool in trainer_info["native_pools"]) == 2
    assert child_info["profile"] == "inference" and child_info["torch_threads"] == 1


def test_embed_corpus_writes_expiring_pages_that_match_embed(stack):
    """1,000 texts inline and 300 from a Redis list: pages of page_size embeddings in Redis with a TTL,
    in input order, equal to inference.embed; progress is reported."""
    inference, _ = stack
    redis = redis_client(inference.redis_url)
    texts = [f"Corpus sentence {i} about invoices, parcels and passwords." for i in range(1000)]
    with EventRecorder(inference.app) as recorder:
        job = inference.app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": texts, "page_size": 256})
        outcome = job.get(timeout=RESULT_TIMEOUT_S)
        wait_until(lambda: recorder.of_type("task-succeeded", job.id), 30, "the corpus job's task-succeeded event")
    done = [event["done"] for event in recorder.of_type("task-progress", job.id)]
    assert done and done == sorted(done) and done[-1] == 1000, done
    assert (outcome["count"], outcome["pages"], outcome["dim"]) == (1000, 4, 384)
    records = [json.loads(redis.get(outcome["page_key"].format(page=n))) for n in range(4)]
    assert [(r["count"], r["encoding"]) for r in records] == [(256, "f32-base64")] * 3 + [(232, "f32-base64")]
    assert outcome["encoding"] == "f32-base64"
    pages = [{"embeddings": codec.decode_vectors(r["embeddings"], r["dim"])} for r in records]
    assert [len(p["embeddings"]) for p in pages] == [256, 256, 256, 232]
    assert 0 < redis.ttl(outcome["page_key"].format(page=0)) <= outcome["expires_s"]
    sample = inference.app.send_task(EMBED_TASK, args=[[texts[0], texts[999]]]).get(timeout=RESULT_TIMEOUT_S)
    assert np.allclose(pages[0]["embeddings"][0], sample["embeddings"][0], atol=1e-4)
    assert np.allclose(pages[3]["embeddings"][-1], sample["embeddings"][1], atol=1e-4)

    redis.delete("corpus:source")
    redis.rpush("corpus:source", *texts[:300])
    listed = inference.app.send_task(
        EMBED_CORPUS_TASK, kwargs={"source_key": "corpus:source", "page_size": 128, "encoding": "json"}
    )
    listed_outcome = listed.get(timeout=RESULT_TIMEOUT_S)
    assert (listed_outcome["count"], listed_outcome["pages"]) == (300, 3)
    first = json.loads(redis.get(listed_outcome["page_key"].format(page=0)))
    assert np.allclose(first["embeddings"][0], pages[0]["embeddings"][0], atol=1e-4)

    # "f32le-base64", the pages' name before embed and embed_corpus shared one, still means float32.
    aliased = inference.app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": texts[:3], "encoding": "f32le-base64"}).get(
        timeout=RESULT_TIMEOUT_S
    )
    page = json.loads(redis.get(aliased["page_key"].format(page=0)))
    assert aliased["encoding"] == page["encoding"] == "f32-base64"
    assert np.allclose(codec.decode_vectors(page["embeddings"], page["dim"]), pages[0]["embeddings"][:3], atol=1e-4)
    refused = inference.app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": texts[:3], "encoding": "f16"})
    with pytest.raises(
        Exception, match=r"inference.embed_corpus: encoding must be one of 'json', 'f32-base64', got 'f16'"
    ):
        refused.get(timeout=RESULT_TIMEOUT_S)


TEXTS, LABELS = dataset()
BAD_TRAINING = [
    pytest.param({"name": "x", "texts": TEXTS[:10], "labels": LABELS[:9]}, "10 texts but 9 labels", id="mismatch"),
    pytest.param({"name": "x", "texts": TEXTS[:8], "labels": ["a"] * 8}, "needs at least 2", id="one-label"),
    pytest.param(
        {"name": "x", "texts": TEXTS[:8], "labels": ["a"] * 6 + ["b"] * 2},
        "'b' have fewer than 4 examples",
        id="scarce",
    ),
    pytest.param({"name": "x", "texts": TEXTS[:8], "labels": [1] * 8}, "labels[0] must be a non-blank", id="int"),
    pytest.param({"name": "", "texts": TEXTS[:8], "labels": LABELS[:8]}, "name must be 1-100 letters", id="empty-name"),
    pytest.param({"name": "a b", "texts": TEXTS[:8], "labels": LABELS[:8]}, "name must be 1-100", id="bad-name"),
    pytest.param(
        {"name": "x", "texts": TEXTS, "labels": LABELS, "test_fraction": 1.5}, "test_fraction must be", id="fraction"
    ),
    pytest.param({"name": "x", "texts": TEXTS, "labels": LABELS, "epochs": 3}, "unknown argument(s) 'epochs'", id="kw"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_TRAINING)
def test_bad_training_requests_fail_alone(stack, kwargs, message):
    """Each bad training request is FAILURE with a readable reason; nothing is stored under its name."""
    inference, _ = stack
    result = inference.app.send_task(TRAIN_CLASSIFIER_TASK, kwargs=kwargs)
    with pytest.raises(Exception, match=re.escape(message)):
        result.get(timeout=RESULT_TIMEOUT_S)
    assert store.latest_version(redis_client(inference.redis_url), "x") is None


def test_classify_with_an_unknown_or_foreign_head_fails_clearly(stack):
    """Unknown name, unknown version, a head trained on another model, or both labels and classifier:
    each fails with its reason."""
    inference, _ = stack
    redis = redis_client(inference.redis_url)
    foreign = store.ClassifierHead(
        name="foreign", model="other-model", labels=["a", "b"], weights=np.zeros((2, 384), np.float32),
        bias=np.zeros(2, np.float32),
    )  # fmt: skip
    store.save_head(redis, foreign)
    cases = [
        ({"classifier": "nobody"}, "no classifier named 'nobody'"),
        ({"classifier": "foreign", "classifier_version": 7}, "classifier 'foreign' has no version 7"),
        ({"classifier": "foreign"}, "was trained on embeddings of model 'other-model'"),
        ({"classifier": "foreign", "labels": ["a", "b"]}, "give either labels"),
        ({}, "give either labels"),
    ]
    for kwargs, message in cases:
        result = inference.app.send_task(CLASSIFY_TASK, args=[["some text"]], kwargs=kwargs)
        with pytest.raises(Exception, match=message):
            result.get(timeout=RESULT_TIMEOUT_S)


def test_the_doctor_sees_a_solo_trainer_and_the_inference_children_on_one_host(stack):
    """The `inference_processes` control command: a solo trainer reports its main process as the one that
    runs tasks, with its 2 threads; the inference worker its 2 one-thread children; the doctor adds
    both up for the host they share."""
    from inference_tasks.ops.doctor import host_verdicts
    from inference_tasks.worker.lifecycle.control import COMMAND

    inference, trainer = stack
    trainer.app.send_task(WORKER_INFO_TASK, queue=TRAINING_QUEUE).get(timeout=RESULT_TIMEOUT_S)  # warmed up
    replies = {}
    for reply in inference.app.control.broadcast(COMMAND, reply=True, timeout=5):
        replies.update(reply)
    by_name = {node.split("@")[0]: report for node, report in replies.items()}
    solo = by_name[trainer.name]
    assert [child["pid"] for child in solo["children"]] == [trainer.process.pid]
    assert [child["compute_threads"] for child in solo["children"]] == [2]
    assert [child["compute_threads"] for child in by_name[inference.name]["children"]] == [1, 1]
    [host] = host_verdicts(replies)
    assert host.compute_threads == 4

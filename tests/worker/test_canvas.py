"""Celery's canvas from Python producers keeps working while screening admits only public task names.

group, chord (native on the Redis backend: no celery.chord_unlock), chain and link callbacks each
put only our own `inference.*` tasks on the wire, so none is refused; each is run through a live
worker and its result checked.
"""

from __future__ import annotations

import pytest
from celery import chain, chord, group

from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
LABELS = ["billing", "bug report"]


def embed(app, text: str):
    return app.signature(EMBED_TASK, args=[[text]])


def classify_alone(app, text: str):
    """Immutable: it ignores the result of the task before it (our tasks take texts, not results)."""
    return app.signature(CLASSIFY_TASK, args=[[text], LABELS], immutable=True)


def test_group_runs_every_member(inference_worker):
    app = inference_worker.app
    results = group(embed(app, f"member {i}") for i in range(4)).apply_async().get(timeout=RESULT_TIMEOUT_S)
    assert [len(result["embeddings"]) for result in results] == [1, 1, 1, 1]


def test_chain_runs_its_steps_in_order(inference_worker):
    app = inference_worker.app
    outcome = chain(embed(app, "first step"), classify_alone(app, "I was charged twice")).apply_async()
    [prediction] = outcome.get(timeout=RESULT_TIMEOUT_S)
    assert prediction["label"] == "billing"
    assert outcome.parent.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384


def test_chord_runs_its_body_after_every_header_task(inference_worker):
    app = inference_worker.app
    header = [embed(app, f"header {i}") for i in range(3)]
    outcome = chord(header)(classify_alone(app, "the app crashes on start"))
    [prediction] = outcome.get(timeout=RESULT_TIMEOUT_S)
    assert prediction["label"] == "bug report"
    assert all(app.AsyncResult(task.id).state == "SUCCESS" for task in outcome.parent.results)


def test_link_callback_runs_after_its_task(inference_worker):
    app = inference_worker.app
    earlier = len(inference_worker.log())  # the session's worker: other modules' refusals are in its log
    callback = classify_alone(app, "refund my payment")
    callback_id = callback.freeze().id
    first = app.send_task(EMBED_TASK, args=[["linked"]], link=callback)
    assert first.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384
    [prediction] = app.AsyncResult(callback_id).get(timeout=RESULT_TIMEOUT_S)
    assert prediction["label"] == "billing"
    assert "refused a message" not in inference_worker.log()[earlier:]

"""Screening raw messages in process: what passes, what is refused, and what the refusal says."""

from __future__ import annotations

import json

import pytest
from conftest import producer_app, redis_client

from inference_tasks.broker.envelope import screen
from inference_tasks.broker.replies import ACTIVE_JOB_WRAPPER, outcome, sidekiq_job
from tests.support.wire import encode, task_message

LIMIT = 100_000


def test_a_message_built_by_hand_passes_and_is_returned_decoded():
    """A well-formed protocol v2 envelope passes with its id and task name."""
    message = task_message("inference.embed", [["a"]], task_id="abc-123")
    screening = screen(encode(message), LIMIT)
    assert screening.accepted
    assert (screening.task_id, screening.task_name) == ("abc-123", "inference.embed")
    assert screening.envelope == message


def test_a_message_made_by_celery_itself_passes(inference_app_message):
    """What Celery's own producer writes passes unchanged (so Python producers keep working)."""
    assert screen(inference_app_message, LIMIT).accepted


@pytest.fixture
def inference_app_message(fresh_redis_url) -> bytes:
    """The raw bytes a Python producer (send_task) leaves in Redis."""
    url = fresh_redis_url()
    producer_app(url).send_task("inference.embed", args=[["hello"]], headers={"sidekiq_reply": {"class": "Ready"}})
    raw = redis_client(url).rpop("inference")
    assert raw is not None
    return raw


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("EmbeddingReadyJob", "sidekiq_reply must be an object"),
        ({"queue": "default"}, "class must be a Ruby class name"),
        ({"class": "system('rm -rf /')"}, "class must be a Ruby class name"),
        ({"class": "Jobs::Ready", "queue": "a queue with spaces"}, "queue must be a Sidekiq queue name"),
        ({"class": "Ready", "redis": "redis://elsewhere"}, "unknown keys ['redis']"),
        ({"class": "Ready", "format": "resque"}, "format must be one of ['sidekiq', 'active_job']"),
        ({"class": "Ready", "format": "active_job", "locale": 7}, "locale must be a string"),
    ],
)
def test_an_unusable_sidekiq_reply_header_is_refused_before_the_task_runs(reply, problem):
    """The reply spec is checked up front: a task never runs only to find it cannot reply."""
    message = task_message("inference.embed", [["a"]])
    message["headers"]["sidekiq_reply"] = reply
    screening = screen(encode(message), LIMIT)
    assert not screening.accepted
    assert problem in screening.problem
    assert screening.task_id == message["headers"]["id"]


def test_an_oversized_message_is_refused_but_keeps_its_task_id_when_cheap_to_read():
    """Up to twice the limit the id is still read (so the producer gets FAILURE); beyond, not parsed."""
    near = task_message("inference.embed", [["x" * LIMIT]])
    far = task_message("inference.embed", [["x" * LIMIT * 3]])
    assert screen(encode(near), LIMIT).task_id == near["headers"]["id"]
    refused = screen(encode(far), LIMIT)
    assert "over the limit of 100000" in refused.problem
    assert refused.task_id is None


def test_a_sidekiq_job_has_sidekiqs_own_shape():
    """class, queue, args=[outcome], a 24-hex jid, timestamps and retry, as Sidekiq::Client writes."""
    job = sidekiq_job({"class": "Ready", "queue": "q"}, outcome("id1", "inference.embed", "SUCCESS", {"dim": 1}))
    assert set(job) == {"class", "queue", "args", "retry", "jid", "created_at", "enqueued_at"}
    assert len(job["jid"]) == 24 and int(job["jid"], 16) >= 0
    assert job["args"][0]["result"] == {"dim": 1} and job["args"][0]["error"] is None
    assert json.loads(json.dumps(job)) == job


def test_an_active_job_reply_is_what_activejobs_sidekiq_adapter_enqueues():
    """JobWrapper around ActiveJob::Core#serialize's hash; the outcome is the job's one argument, a
    string-keyed Hash (ActiveJob's empty symbol-key marker), so `perform(outcome)` gets the same hash."""
    spec = {"class": "EmbeddingReadyJob", "queue": "low", "format": "active_job", "locale": "de", "timezone": "Berlin"}
    payload = outcome("id1", "inference.embed", "FAILURE", None, ValueError("texts[0] is blank"), {"article_id": 3})
    job = sidekiq_job(spec, payload)
    assert job["class"] == ACTIVE_JOB_WRAPPER == "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
    assert job["wrapped"] == "EmbeddingReadyJob" and job["queue"] == "low"
    (data,) = job["args"]
    assert set(data) == {
        "job_class", "job_id", "provider_job_id", "queue_name", "priority", "arguments", "executions",
        "exception_executions", "locale", "timezone", "enqueued_at",
    }  # fmt: skip
    assert (data["job_class"], data["queue_name"], data["locale"], data["timezone"]) == (
        "EmbeddingReadyJob",
        "low",
        "de",
        "Berlin",
    )
    assert data["executions"] == 0 and data["exception_executions"] == {}
    assert data["arguments"] == [{**payload, "_aj_symbol_keys": []}]
    assert data["arguments"][0]["error"] == {"type": "ValueError", "message": "texts[0] is blank"}
    assert len(data["enqueued_at"]) == 20 and data["enqueued_at"].endswith("Z")
    plain = sidekiq_job({"class": "EmbeddingReadyJob"}, payload)
    assert plain["class"] == "EmbeddingReadyJob" and "wrapped" not in plain and plain["args"] == [payload]

"""OpenTelemetry traces through a real worker: a Ruby producer's traceparent continued by a micro-batched
worker exporting over real OTLP/HTTP to a receiver this test runs (decoded with opentelemetry-proto);
the Python producer's current span propagated; the Sidekiq reply job carrying the context on; log
lines carrying the trace id; and a worker without the OTEL_* variables exporting nothing."""

from __future__ import annotations

import itertools
import json
import secrets

import pytest
import redis

from inference_tasks import producer
from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from inference_tasks.tracing.config import tracing_configured
from tests.support.localstack import producer_app
from tests.support.otlp_receiver import start_receiver
from tests.support.ruby_runner import ruby
from tests.support.waiting import wait_until

RESULT_TIMEOUT_S = 90
CONSUMER = 5  # opentelemetry.proto's SPAN_KIND_CONSUMER
STEPS = ("queue wait", "screening", "micro-batch wait")


def test_tracing_is_off_unless_an_otlp_endpoint_is_configured():
    assert not tracing_configured({})
    assert tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert not tracing_configured({**endpoint, "OTEL_SDK_DISABLED": "true"})
    assert not tracing_configured({**endpoint, "OTEL_TRACES_EXPORTER": "none"})


@pytest.fixture(scope="module")
def receiver():
    receiver = start_receiver()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def traced_worker(start_worker, receiver):
    extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "inference-under-test",
             "OTEL_BSP_SCHEDULE_DELAY": "100"}  # fmt: skip
    return start_worker(concurrency=1, extra_env=extra)


def new_parent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def spans_of(receiver, trace_id: str, names: set[str]) -> list[dict]:
    """The trace's spans once every one of `names` has arrived."""
    return wait_until(
        lambda: (found := receiver.of_trace(trace_id)) and names <= {span["name"] for span in found} and found,
        60, f"spans {sorted(names)} of trace {trace_id}",
    )  # fmt: skip


def check_task_trace(receiver, trace_id: str, parent_span_id: str) -> dict:
    """The task's span continues the caller's; its steps are its children, in order, inside it."""
    spans = spans_of(receiver, trace_id, {EMBED_TASK, *STEPS, "result store"})
    [root] = [span for span in spans if span["name"] == EMBED_TASK]
    assert root["parent_span_id"] == parent_span_id and root["kind"] == CONSUMER
    assert root["resource"]["service.name"] == "inference-under-test"
    children = {span["name"]: span for span in spans if span["parent_span_id"] == root["span_id"]}
    steps = [children[name] for name in STEPS]
    assert steps[0]["start"] == root["start"]
    for before, after in itertools.pairwise(steps):
        assert before["end"] == after["start"]  # one step ends where the next begins
    assert all(root["start"] <= span["start"] <= span["end"] <= root["end"] for span in children.values())
    assert children["result store"]["start"] >= steps[-1]["end"]
    if root["attributes"]["inference.micro_batched"]:
        [(link_trace, link_span)] = root["links"]
        shared = wait_until(lambda: receiver.by_id(link_span), 30, "the micro-batch's forward pass span")
        assert shared["name"] == "forward pass" and shared["trace_id"] == link_trace
        assert steps[-1]["end"] <= shared["start"] + 1_000_000 and shared["end"] <= root["end"]
    else:
        forward = children["forward pass"]
        assert forward["start"] >= steps[-1]["end"] and forward["end"] <= children["result store"]["start"]
    return root


@pytest.mark.external
def test_a_ruby_producers_trace_runs_through_a_micro_batched_worker(traced_worker, receiver):
    parents = [new_parent() for _ in range(6)]
    report = ruby("traced_embed.rb", traced_worker.redis_url, TRACEPARENTS=json.dumps([p[2] for p in parents]))
    assert "traceparent must be a W3C traceparent" in report["refused"]
    roots = [check_task_trace(receiver, trace_id, span_id) for trace_id, span_id, _ in parents]
    assert any(root["attributes"]["inference.micro_batched"] for root in roots)
    batched = [root for root in roots if root["attributes"]["inference.micro_batched"]]
    passes = {root["links"][0][1] for root in batched}
    assert any(receiver.by_id(span_id)["attributes"]["inference.tasks"] > 1 for span_id in passes)
    # The reply job goes on with the trace: its traceparent names the span that pushed it.
    client = redis.Redis.from_url(traced_worker.redis_url)
    job = json.loads(wait_until(lambda: client.lindex("queue:traced", 0), 60, "the reply job"))
    trace_id = parents[-1][0]
    _, job_trace, job_span, _ = job["traceparent"].split("-")
    assert job_trace == trace_id and job["class"] == "TracedReplyJob"
    pusher = wait_until(lambda: receiver.by_id(job_span), 30, "the reply job span")
    assert pusher["name"] == "reply job" and pusher["trace_id"] == trace_id
    # Log lines of a task carry its trace id.
    wait_until(lambda: f"trace_id={parents[0][0]}" in traced_worker.log(), 30, "a log line with the trace id")


def test_the_python_producer_propagates_its_current_span(traced_worker, receiver):
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("rails-like-caller")
    app = producer_app(traced_worker.redis_url)
    with tracer.start_as_current_span("caller") as caller:
        sent = producer.send(app, EMBED_TASK, args=[["a traced text from python"]])
    producer.collect(sent, RESULT_TIMEOUT_S)
    context = caller.get_span_context()
    check_task_trace(receiver, format(context.trace_id, "032x"), format(context.span_id, "016x"))
    info = app.send_task(WORKER_INFO_TASK, queue="inference").get(timeout=RESULT_TIMEOUT_S)
    assert info["tracing"] is True


def test_a_worker_without_otel_variables_traces_nothing(inference_worker):
    app = producer_app(inference_worker.redis_url)
    trace_id, _, traceparent = new_parent()
    sent = producer.send(app, EMBED_TASK, args=[["an untraced text"]], headers={"traceparent": traceparent})
    assert producer.collect(sent, RESULT_TIMEOUT_S)["embeddings"]
    info = app.send_task(WORKER_INFO_TASK, queue="inference").get(timeout=RESULT_TIMEOUT_S)
    assert info["tracing"] is False
    assert f"trace_id={trace_id}" not in inference_worker.log()

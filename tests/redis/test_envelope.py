"""Screening raw messages in process: what passes, what is refused, and what the refusal says."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from inference_tasks.app import broker_transport_options
from inference_tasks.broker.envelope import screen
from inference_tasks.broker.json_shape import depth_of, measure
from inference_tasks.broker.limits import ScreeningLimits, limits_from_options, with_max_bytes
from inference_tasks.broker.replies import ACTIVE_JOB_WRAPPER, outcome, sidekiq_job
from inference_tasks.config import Settings
from inference_tasks.routing import PUBLIC_TASKS
from tests.support.local import redis_client
from tests.support.localstack import producer_app
from tests.support.wire import encode, task_message

LIMIT = 100_000


def limits_for(settings: Settings, max_bytes: int = LIMIT) -> ScreeningLimits:
    """The limits a worker with `settings` screens with, built as its channel builds them."""
    return with_max_bytes(limits_from_options(broker_transport_options(settings)), max_bytes)


LIMITS = limits_for(Settings())


def test_a_message_built_by_hand_passes_and_is_returned_decoded():
    """A well-formed protocol v2 envelope passes with its id and task name."""
    message = task_message("inference.embed", [["a"]], task_id="abc-123")
    screening = screen(encode(message), LIMITS)
    assert screening.accepted
    assert (screening.task_id, screening.task_name) == ("abc-123", "inference.embed")
    assert screening.envelope == message


def test_a_message_made_by_celery_itself_passes(inference_app_message):
    """What Celery's own producer writes passes unchanged (so Python producers keep working)."""
    assert screen(inference_app_message, LIMITS).accepted


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
    screening = screen(encode(message), LIMITS)
    assert not screening.accepted
    assert problem in screening.problem
    assert screening.task_id == message["headers"]["id"]


@pytest.mark.parametrize(
    ("header", "value", "problem"),
    [
        # Found by the wire fuzzer: Celery iterates stamped_headers in the main process.
        ("stamped_headers", 1.5, "headers.stamped_headers must be a list of strings or null"),
        ("stamped_headers", ["a", 2], "headers.stamped_headers must be a list of strings or null"),
        ("groups", "g", "headers.groups must be a list of strings or null"),
        ("stamps", [1], "headers.stamps must be an object or null"),
        ("replaced_task_nesting", -1, "headers.replaced_task_nesting must be a non-negative integer or null"),
        ("group_index", "0", "headers.group_index must be an integer or null"),
        ("inference_durable", "yes", "headers.inference_durable must be true, false or null"),
        ("inference_sent_at", "now", "headers.inference_sent_at must be a number (Unix seconds) or null"),
    ],
)
def test_headers_celery_or_we_read_must_have_their_types(header, value, problem):
    message = task_message("inference.embed", [["a"]])
    message["headers"][header] = value
    screening = screen(encode(message), LIMITS)
    assert not screening.accepted and screening.problem == problem
    assert screening.task_id == message["headers"]["id"]
    message["headers"][header] = None
    assert screen(encode(message), LIMITS).accepted


def test_an_oversized_message_is_refused_but_keeps_its_task_id_when_cheap_to_read():
    """Up to twice the limit the id is still read (so the producer gets FAILURE); beyond, not parsed."""
    near = task_message("inference.embed", [["x" * LIMIT]])
    far = task_message("inference.embed", [["x" * LIMIT * 3]])
    assert screen(encode(near), LIMITS).task_id == near["headers"]["id"]
    refused = screen(encode(far), LIMITS)
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


def nested(depth: int) -> object:
    value: object = "text"
    for _ in range(depth):
        value = [value]
    return value


def test_a_900_deep_argument_is_refused_by_its_depth_before_anything_parses_it():
    """The issue's poison message (texts nested 900 lists deep: valid JSON) is refused with the depth
    and the variable that bounds it; its id is still read, so its producer gets a FAILURE."""
    message = task_message("inference.embed", [nested(900)])
    refused = screen(encode(message), LIMITS)
    assert not refused.accepted
    assert "body is nested 902 levels deep, over the limit of 32 (INFERENCE_MAX_NESTING_DEPTH)" in refused.problem
    assert refused.task_id == message["headers"]["id"]


def test_a_deep_header_is_refused_and_far_deeper_than_python_can_parse_too():
    """Depth counts in the envelope (headers) as in the body, also past what json.loads can decode."""
    shallow_enough = task_message("inference.embed", [["a"]])
    shallow_enough["headers"]["x-trace"] = nested(25)
    assert screen(encode(shallow_enough), LIMITS).accepted
    deep = task_message("inference.embed", [["a"]])
    deep["headers"]["x-trace"] = nested(40)
    refused = screen(encode(deep), LIMITS)
    assert "message is nested 42 levels deep" in refused.problem and refused.task_id == deep["headers"]["id"]
    unparseable = b'{"headers": {"id": "x", "task": "inference.embed"}, "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert "message is nested 100001 levels deep" in screen(unparseable, limits_for(Settings(), 10**6)).problem


def test_each_argument_has_its_own_depth_limit():
    """An argument nested past INFERENCE_MAX_ARGUMENT_DEPTH is named (positional or keyword), though
    the body is within its own limit; the deepest legitimate shape (a chord callback's results) passes."""
    chord_results = [[{"model": "m", "dim": 2, "embeddings": [[0.1, 0.2]]}]]
    assert screen(encode(task_message("inference.embed", chord_results)), LIMITS).accepted
    refused = screen(encode(task_message("inference.embed", [["a"]], {"normalize": nested(9)})), LIMITS)
    assert "kwargs['normalize'] is nested 9 levels deep, over the limit of 8 (INFERENCE_MAX_ARGUMENT_DEPTH)" in (
        refused.problem
    )
    refused = screen(encode(task_message("inference.embed", [nested(9)])), LIMITS)
    assert "args[0] is nested 9 levels deep" in refused.problem


def test_a_body_with_too_many_values_is_refused_unparsed():
    """Value counts (array elements, object members) are bounded by INFERENCE_MAX_MESSAGE_ITEMS."""
    limits = limits_for(Settings(max_message_items=1_000))
    assert screen(encode(task_message("inference.embed", [["a"] * 990])), limits).accepted
    refused = screen(encode(task_message("inference.embed", [[0] * 1_001])), limits)
    assert "body holds 1009 JSON values" in refused.problem and "INFERENCE_MAX_MESSAGE_ITEMS" in refused.problem


@pytest.mark.parametrize("name", ["celery.backend_cleanup", "celery.chord_unlock", "celery.starmap", "os.system", ""])
def test_only_public_task_names_are_accepted_from_the_wire(name):
    """Celery's built-in tasks and any name outside the public ones are refused, naming what is accepted."""
    refused = screen(encode(task_message(name, [])), LIMITS)
    assert not refused.accepted
    if name:
        assert f"headers.task {name!r} is not a task producers may send here" in refused.problem
        assert "inference.embed" in refused.problem and "INFERENCE_EXTRA_TASKS" in refused.problem


def test_extra_task_names_and_prefixes_are_accepted_when_configured():
    """INFERENCE_EXTRA_TASKS admits a team's own tasks by name or by "prefix.*"; never celery.*."""
    limits = limits_for(Settings(extra_tasks="billing.refresh, myapp.*"))
    for name in (*PUBLIC_TASKS, "billing.refresh", "myapp.reports.weekly"):
        assert screen(encode(task_message(name, [])), limits).accepted, name
    assert not screen(encode(task_message("billing.refresh_all", [])), limits).accepted
    with pytest.raises(ValueError, match="celery"):
        Settings(extra_tasks="celery.*")


def test_an_eta_beyond_the_horizon_is_refused_and_one_within_it_passes():
    """eta/countdown at most INFERENCE_MAX_ETA_S ahead; naive ETAs read as UTC like Celery's."""
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    soon = task_message("inference.embed", [["a"]])
    soon["headers"]["eta"] = (now + timedelta(minutes=59)).isoformat()
    assert screen(encode(soon), LIMITS, now).accepted
    far = task_message("inference.embed", [["a"]])
    far["headers"]["eta"] = "2999-01-01T00:00:00"
    refused = screen(encode(far), LIMITS, now)
    assert "headers.eta 2999-01-01T00:00:00 is" in refused.problem
    assert "beyond the scheduling horizon of 3600 s (INFERENCE_MAX_ETA_S)" in refused.problem


def test_the_raw_shape_matches_the_decoded_value():
    """measure() on the bytes agrees with the decoded value's depth and item count, whatever the strings
    hold (quotes, escapes, brackets and commas inside texts never count)."""
    values = [
        [],
        {},
        "a[b",
        [1, [2, {"k": []}]],
        ["x,y", '"[', "\\", '\\"]', {'a"': [[[]]]}],
        {"texts": ["]]]", "{{{", ",,,"], "n": None},
    ]
    for value in values:
        for raw in (json.dumps(value), json.dumps(value, indent=2, ensure_ascii=False)):
            shape = measure(raw.encode())
            assert shape.depth == depth_of(value), raw
            assert shape.items == _items(value), raw


def _items(value: object) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_items(item) for item in value.values())
    if isinstance(value, list):
        return len(value) + sum(_items(item) for item in value)
    return 0


def test_a_failure_while_delivering_a_screened_message_refuses_it_instead_of_raising(fresh_redis_url):
    """Past screening, kombu builds the Message, writes the unacked record and runs the consumer's callback;
    anything that raises there (here the callback itself) costs that message: dead-lettered, FAILURE stored,
    its unacked record removed, and the consumer's drain_events does not raise."""
    from kombu import Consumer, Exchange, Queue

    from inference_tasks.redis_access.keys import DEAD_LETTER_KEY

    url = fresh_redis_url()
    app = producer_app(url)
    redis = redis_client(url)
    message = task_message("inference.embed", [["a"]])

    def breaks(body: object, delivered: object) -> None:
        raise RuntimeError("a consumer that cannot take this message")

    queue = Queue("inference", Exchange("inference"), routing_key="inference")
    with app.connection_for_read() as connection, Consumer(connection, [queue], callbacks=[breaks], accept=["json"]):
        redis.lpush("inference", encode(message))
        connection.drain_events(timeout=10)
        connection.default_channel.qos.write_acks()  # what the worker's event loop does after the turn
    [entry] = [json.loads(raw) for raw in redis.lrange(DEAD_LETTER_KEY, 0, -1)]
    assert entry["task_id"] == message["headers"]["id"]
    assert "RuntimeError: a consumer that cannot take this message" in entry["reason"]
    assert redis.hlen("unacked") == 0
    failed = app.AsyncResult(message["headers"]["id"])
    assert failed.state == "FAILURE" and "UnhandledMessage" in type(failed.result).__name__


def test_a_channel_whose_transport_let_go_of_its_connection_closes_and_keeps_its_unacked_record(fresh_redis_url):
    """kombu's close restores unacked messages through a new pool built from the transport's connection;
    once the transport has let go of it (seen after a Sentinel primary was killed: the whole worker
    exited on an AttributeError), the channel closes anyway and the message stays recorded in Redis
    for the visibility sweep."""
    from kombu import Consumer, Exchange, Queue

    url = fresh_redis_url()
    app = producer_app(url)
    redis = redis_client(url)
    held: list[object] = []
    queue = Queue("inference", Exchange("inference"), routing_key="inference")
    connection = app.connection_for_read()
    try:
        with Consumer(connection, [queue], callbacks=[lambda body, message: held.append(message)], accept=["json"]):
            redis.lpush("inference", encode(task_message("inference.embed", [["a"]])))
            connection.drain_events(timeout=10)
            assert len(held) == 1 and redis.hlen("unacked") == 1
            channel = connection.default_channel
            connection.transport.client = None  # what kombu's Connection._do_close_transport leaves
            channel.close()
        assert channel.closed and redis.hlen("unacked") == 1 and redis.llen("inference") == 0
    finally:
        connection.transport.client = connection
        connection.release()


def test_an_ack_or_requeue_after_its_channel_closed_leaves_the_record_for_the_sweep(fresh_redis_url):
    """A task that ends after a lost broker connection closed its channel (its micro-batch terminated,
    say) is acked or requeued on that closed channel: nothing reaches Redis through it (it used to
    raise AttributeError out of the event loop: the whole worker exited), and the unacked record stays
    for the visibility sweep."""
    from kombu import Consumer, Exchange, Queue

    url = fresh_redis_url()
    app = producer_app(url)
    redis = redis_client(url)
    held: list = []
    queue = Queue("inference", Exchange("inference"), routing_key="inference")
    connection = app.connection_for_read()
    try:
        with Consumer(connection, [queue], callbacks=[lambda body, message: held.append(message)], accept=["json"]):
            for text in ("a", "b"):
                redis.lpush("inference", encode(task_message("inference.embed", [[text]])))
                connection.drain_events(timeout=10)
            assert len(held) == 2 and redis.hlen("unacked") == 2
            channel = connection.default_channel
            connection.transport.client = None  # the transport let go, as on a lost connection
            channel.close()
            held[0].reject(requeue=True)
            held[1].ack()
        assert redis.hlen("unacked") == 2 and redis.llen("inference") == 0
    finally:
        connection.transport.client = connection
        connection.release()

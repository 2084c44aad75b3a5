"""The micro-batcher's decisions (worker/batching/batcher.py) against stand-ins for Celery's consumer parts.

What is checked here is pure bookkeeping: when a batch is flushed, what goes to the pool, and
that the prefetch window always returns to where it was. Queue behaviour (acks, redelivery,
results) is tested through real workers and Redis in test_microbatch.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from billiard.einfo import ExceptionInfo

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, ModelEntry
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, RERANK_TASK
from inference_tasks.worker.batching.batch_job import run_batch
from inference_tasks.worker.batching.batcher import Batcher
from inference_tasks.worker.batching.plan import planned_encode
from inference_tasks.worker.celery_ext.pool import JobNotSent
from inference_tasks.worker.lifecycle import context

MINILM = ModelEntry("minilm")

BASE_PREFETCH = 2
# The worker's own window plus the one unit the batcher adds for the batch it gathers.
WINDOW = BASE_PREFETCH + 1


@dataclass
class FakeRequest:
    id: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    name: str = EMBED_TASK
    is_revoked: bool = False
    outcomes: list = field(default_factory=list)
    time_limits: tuple = (None, None)

    type = EMBED_TASK
    request_dict: dict = field(default_factory=dict)
    body: bytes = b"[]"
    content_type: str = "application/json"
    content_encoding: str = "utf-8"
    batch_job: Any = None

    @property
    def task(self) -> Any:
        return type("T", (), {"time_limit": 330, "soft_time_limit": 300})

    def revoked(self) -> bool:
        return self.is_revoked

    def on_accepted(self, pid: int, time_accepted: float) -> None:
        self.outcomes.append(("accepted", pid))

    def on_success(self, outcome: Any) -> None:
        self.outcomes.append(("success", outcome))

    def on_failure(self, exc_info: Any) -> None:
        self.outcomes.append(("failure", exc_info))

    def on_timeout(self, soft: bool, timeout: float) -> None:
        self.outcomes.append(("timeout", soft))

    def reject(self, requeue: bool = False) -> None:
        self.outcomes.append(("reject", requeue))


class FakeQoS:
    def __init__(self) -> None:
        self.value = BASE_PREFETCH

    def increment_eventually(self, n: int = 1) -> None:
        self.value += n

    def decrement_eventually(self, n: int = 1) -> None:
        self.value = max(1, self.value - n)


class FakeTimer:
    def __init__(self) -> None:
        self.entries: list[Any] = []

    def call_after(self, secs: float, fun: Any) -> Any:
        entry = type("Entry", (), {"cancelled": False, "secs": secs, "fun": fun})()
        entry.cancel = lambda: setattr(entry, "cancelled", True)
        self.entries.append(entry)
        return entry

    def fire(self) -> None:
        for entry in [e for e in self.entries if not e.cancelled]:
            entry.cancelled = True
            entry.fun()


class FakeJob:
    """What the pool returns for a job (weak-referenceable, like billiard's ApplyResult)."""


class FakeChildren:
    """The part of the prefork pool (pool.py's AsynPool) the batcher asks whether a child is free."""

    def __init__(self) -> None:
        self.idle = True
        self.all_idle = False  # some child busy: the batcher waits for more tasks
        self.queued = False  # jobs waiting in the pool for a free child
        self.on_child_free: list = []

    def has_idle_child(self) -> bool:
        return self.idle

    def all_children_idle(self) -> bool:
        return self.all_idle

    def has_queued_jobs(self) -> bool:
        return self.queued

    def free_one(self) -> None:
        self.idle = True
        for listener in self.on_child_free:
            listener()


class FakePool:
    def __init__(self) -> None:
        self.jobs: list[dict] = []

    def apply_async(self, fun: Any, args: tuple = (), **callbacks: Any) -> object:
        self.jobs.append({"fun": fun, "args": args, **callbacks})
        return FakeJob()


class FakeConsumer:
    def __init__(self) -> None:
        self.qos = FakeQoS()
        self.timer = FakeTimer()
        self.pool = FakePool()
        self.children = FakeChildren()  # the worker context's pool, as the batcher sees it
        self.handled: list[FakeRequest] = []
        self.app = type("App", (), {"use_fast_trace_task": True, "settings": SimpleNamespace(served_model=MINILM)})()

    def on_task_request(self, request: FakeRequest) -> None:
        self.handled.append(request)


def one_text(task_id: str, text: str = "a short text") -> FakeRequest:
    return FakeRequest(task_id, args=[[text]])


def batcher(consumer: FakeConsumer, max_texts: int = 4) -> Batcher:
    context.start().pool = consumer.children  # a fresh worker context whose pool is the fake
    return Batcher(consumer, max_texts=max_texts, wait_s=0.005, max_text_chars=10_000)


def test_small_tasks_wait_for_the_timer_then_go_to_the_pool_as_one_job():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    requests = [one_text(f"t{i}") for i in range(3)]
    for request in requests:
        coalescer.add(request)
    assert consumer.pool.jobs == [] and consumer.qos.value == WINDOW + 3  # held ones do not count
    assert len(consumer.timer.entries) == 1 and consumer.timer.entries[0].secs == 0.005
    consumer.timer.fire()
    [job] = consumer.pool.jobs
    assert job["fun"] is run_batch
    _trace, entries, plans = job["args"]
    assert [entry[1] for entry in entries] == ["t0", "t1", "t2"]
    assert [plan.texts for plan in plans] == [["a short text"]] * 3
    assert consumer.qos.value == WINDOW + 2  # the batch now counts as one reserved task
    job["accept_callback"](1234, 0.0)
    job["callback"]([(0, "ok", 0.01)] * 3)
    assert all(r.outcomes == [("accepted", 1234), ("success", (0, "ok", 0.01))] for r in requests)
    assert consumer.qos.value == WINDOW


def test_a_batch_whose_wait_is_over_keeps_gathering_until_a_child_is_free():
    consumer = FakeConsumer()
    coalescer = batcher(consumer, max_texts=8)
    consumer.children.idle = False
    coalescer.add(one_text("first"))
    consumer.timer.fire()  # the wait is over, but every child is busy
    coalescer.add(one_text("second"))
    assert consumer.pool.jobs == [] and len([e for e in consumer.timer.entries if not e.cancelled]) == 1
    consumer.children.free_one()
    [job] = consumer.pool.jobs
    assert [entry[1] for entry in job["args"][1]] == ["first", "second"]


def test_a_batch_whose_wait_is_over_joins_jobs_already_queued_in_the_pool():
    """Every child busy, but full-size tasks wait in the pool for the next one: held on, the batch would
    be overtaken by each of them; it joins the queue when its wait is over (or at the next re-check)."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer, max_texts=8)
    consumer.children.idle = False
    coalescer.add(one_text("first"))
    consumer.timer.fire()  # wait over, every child busy, nothing queued: it keeps gathering
    assert consumer.pool.jobs == [] and consumer.handled == []
    consumer.children.queued = True  # a full-size task went to the pool directly
    consumer.timer.fire()
    assert [request.id for request in consumer.handled] == ["first"]


def test_a_task_that_finds_every_child_idle_goes_at_once():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    consumer.children.all_idle = True
    lone = one_text("lone")
    coalescer.add(lone)
    assert consumer.handled == [lone] and consumer.timer.entries == []


def test_a_held_batch_also_finds_a_child_freed_without_notice():
    """A recycled child's replacement comes up idle without a job finishing: no on_child_free."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    consumer.children.idle = False
    coalescer.add(one_text("a"))
    coalescer.add(one_text("b"))
    consumer.timer.fire()  # wait over, every child busy: a re-check is scheduled
    assert consumer.pool.jobs == []
    consumer.children.idle = True  # a replacement child is up; nobody says so
    consumer.timer.fire()
    assert len(consumer.pool.jobs) == 1


def test_a_free_child_does_not_cut_a_wait_short():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    coalescer.add(one_text("a"))
    coalescer.add(one_text("b"))
    consumer.children.free_one()
    assert consumer.pool.jobs == []
    consumer.timer.fire()
    assert len(consumer.pool.jobs) == 1


def test_reaching_the_text_limit_flushes_at_once():
    consumer = FakeConsumer()
    coalescer = batcher(consumer, max_texts=4)
    for i in range(4):
        coalescer.add(one_text(f"t{i}"))
    assert len(consumer.pool.jobs) == 1 and consumer.timer.entries[0].cancelled
    assert coalescer.held == []


def test_a_task_that_would_overflow_the_batch_flushes_what_is_held_first():
    consumer = FakeConsumer()
    coalescer = batcher(consumer, max_texts=4)
    coalescer.add(one_text("a"))
    coalescer.add(one_text("b"))
    coalescer.add(FakeRequest("c", kwargs={"texts": ["x", "y", "z"]}))
    [job] = consumer.pool.jobs
    assert [entry[1] for entry in job["args"][1]] == ["a", "b"]
    assert [request.id for request, _ in coalescer.held] == ["c"]


def test_a_full_batch_on_its_own_takes_the_normal_path():
    consumer = FakeConsumer()
    coalescer = batcher(consumer, max_texts=4)
    big = FakeRequest("big", kwargs={"texts": ["x"] * 4})
    coalescer.add(big)
    assert consumer.handled == [big] and consumer.pool.jobs == [] and consumer.qos.value == WINDOW


def test_a_lone_task_is_flushed_by_the_timer_to_the_normal_path():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    lone = one_text("lone")
    coalescer.add(lone)
    consumer.timer.fire()
    assert consumer.handled == [lone] and consumer.pool.jobs == [] and consumer.qos.value == WINDOW


def test_a_task_revoked_while_held_is_dropped_and_its_prefetch_slot_returned():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    kept, revoked = one_text("kept"), one_text("revoked")
    coalescer.add(kept)
    coalescer.add(revoked)
    revoked.is_revoked = True
    consumer.timer.fire()
    assert consumer.handled == [kept] and consumer.qos.value == WINDOW


def test_a_task_whose_revocation_check_raises_goes_alone_or_is_refused_and_its_batch_mates_run():
    """Found by the wire fuzzer: Celery's revoked() raised on a header of the wrong type, in the pool's
    child-free callback, and stopped the worker. Now that task goes alone; if Celery's own path raises
    for it too, the consumer refuses the message; its batch-mates run either way."""

    def raises_type_error() -> bool:
        raise TypeError("'float' object is not iterable")  # what Celery raised

    for alone_raises in (False, True):
        consumer = FakeConsumer()
        refused: list[tuple] = []
        consumer.connection_errors = ()  # type: ignore[attr-defined]
        consumer.on_message_failed = lambda message, error, out=refused: out.append((message, str(error)))  # type: ignore[attr-defined]
        coalescer = batcher(consumer)
        kept, broken = one_text("kept"), one_text("broken")
        broken.revoked = raises_type_error  # type: ignore[method-assign]
        broken.message = "the broken message"  # type: ignore[attr-defined]
        if alone_raises:
            coalescer.handle = lambda request, handle=coalescer.handle, broken=broken: (
                raises_type_error() if request is broken else handle(request)
            )
        for request in (kept, broken):
            coalescer.add(request)
        consumer.timer.fire()
        assert consumer.handled == ([kept] if alone_raises else [broken, kept])
        assert refused == ([("the broken message", "'float' object is not iterable")] if alone_raises else [])
        assert consumer.qos.value == WINDOW


def test_a_lost_child_fails_every_task_of_its_batch_through_celerys_own_handler():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    requests = [one_text(f"t{i}") for i in range(3)]
    for request in requests:
        coalescer.add(request)
    consumer.timer.fire()
    consumer.pool.jobs[0]["error_callback"]("exc-info")
    assert all(r.outcomes == [("failure", "exc-info")] for r in requests)
    assert consumer.qos.value == WINDOW


def test_a_task_whose_tracing_broke_goes_back_to_its_queue():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    requests = [one_text("a"), one_text("b")]
    for request in requests:
        coalescer.add(request)
    consumer.timer.fire()
    consumer.pool.jobs[0]["callback"]([(0, "ok", 0.01), None])
    assert requests[0].outcomes == [("success", (0, "ok", 0.01))]
    assert requests[1].outcomes == [("reject", True)]


def test_bad_arguments_are_held_but_left_out_of_the_shared_encode():
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    for request in (one_text("good"), FakeRequest("bad", args=[[""]]), FakeRequest("worse", args=["not a list"])):
        coalescer.add(request)
    consumer.timer.fire()
    _trace, entries, plans = consumer.pool.jobs[0]["args"]
    assert [entry[1] for entry in entries] == ["good", "bad", "worse"]  # each still runs, and fails, alone
    assert [plan.task_id for plan in plans] == ["good"]


def test_planned_encode_reads_texts_and_normalize_from_args_or_kwargs():
    assert planned_encode(FakeRequest("a", args=[["x", "y"], False]), MINILM).normalize is False
    assert planned_encode(FakeRequest("b", kwargs={"texts": ["x"], "normalize": False}), MINILM).texts == ["x"]
    assert planned_encode(FakeRequest("c", kwargs={"texts": ["x"], "normalize": "no"}), MINILM) is None
    assert planned_encode(FakeRequest("d", kwargs={"texts": []}), MINILM) is None
    assert planned_encode(FakeRequest("e", kwargs={"texts": ["x", 3]}), MINILM) is None
    zero_shot = FakeRequest("f", kwargs={"texts": ["x"], "labels": ["a", "b"]}, name=CLASSIFY_TASK)
    assert planned_encode(zero_shot, MINILM).normalize is True  # classify always compares unit vectors


PROMPTED = ModelEntry("e5", prompts={"query": "query: ", "passage": "passage: "}, default_prompt="passage")
CROSS = ModelEntry("ce", source="/srv/ce", kind=CROSS_ENCODER_KIND)


def test_planned_encode_applies_prompts_as_the_task_will():
    """The batch encodes what the task will ask for, prompts included, or the task encodes twice."""
    assert planned_encode(FakeRequest("a", args=[["x"]]), PROMPTED).texts == ["passage: x"]
    named = FakeRequest("b", kwargs={"texts": ["x"], "prompt_name": "query"})
    assert planned_encode(named, PROMPTED).texts == ["query: x"]
    assert planned_encode(FakeRequest("c", kwargs={"texts": ["x"], "prompt": "q: "}), PROMPTED).texts == ["q: x"]
    assert planned_encode(FakeRequest("d", kwargs={"texts": ["x"], "prompt_name": "nope"}), PROMPTED) is None
    zero_shot = FakeRequest("e", kwargs={"texts": ["x"], "labels": ["a", "b"]}, name=CLASSIFY_TASK)
    assert planned_encode(zero_shot, PROMPTED).texts == ["query: x"]


def test_planned_rerank_encodes_query_and_documents_or_pairs():
    rerank = FakeRequest("r", args=["why", ["a", "b"]], name=RERANK_TASK)
    assert planned_encode(rerank, PROMPTED).texts == ["query: why", "passage: a", "passage: b"]
    pairs = planned_encode(rerank, CROSS)
    assert (pairs.query, pairs.texts) == ("why", ["a", "b"])
    assert planned_encode(FakeRequest("s", args=["why", []], name=RERANK_TASK), MINILM) is None


def test_a_closed_batcher_drops_what_it_holds_and_sends_nothing_more():
    """On a warm shutdown or a lost connection the held messages go back to the queue unacked;
    running them here as well would run them twice."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    coalescer.add(one_text("held"))
    coalescer.close()
    consumer.timer.fire()
    consumer.children.free_one()
    assert consumer.pool.jobs == [] and consumer.handled == [] and coalescer.held == []
    assert consumer.children.on_child_free == []


def not_sent() -> Any:
    """What the pool gives a job's error_callback when it could not send the job (pool.py)."""
    try:
        raise JobNotSent("RecursionError: maximum recursion depth exceeded while pickling an object")
    except JobNotSent:
        return ExceptionInfo()


def test_a_batch_the_pool_could_not_send_goes_out_task_by_task():
    """One task's arguments broke the batch job's serialisation: every task is sent alone instead (the one at
    fault then fails alone, its batch-mates run), none is failed for it, and the prefetch window is back."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    requests = [one_text(f"t{i}") for i in range(3)]
    for request in requests:
        coalescer.add(request)
    consumer.timer.fire()
    consumer.pool.jobs[0]["error_callback"](not_sent())
    assert consumer.handled == requests
    assert all(r.outcomes == [] for r in requests)
    assert consumer.qos.value == WINDOW


def test_a_task_whose_planning_breaks_runs_on_its_own():
    """Planning reads the arguments in the main process; if that raises, the task is held unplanned (it runs
    alone and validates in the child) instead of the error escaping into the consumer."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer)

    class Unreadable(dict):
        def get(self, *_: Any) -> Any:
            raise RuntimeError("cannot read these arguments")

    odd = FakeRequest("odd", kwargs=Unreadable())
    coalescer.add(one_text("good"))
    coalescer.add(odd)
    consumer.timer.fire()
    _trace, entries, plans = consumer.pool.jobs[0]["args"]
    assert [entry[1] for entry in entries] == ["good", "odd"] and [plan.task_id for plan in plans] == ["good"]


def test_a_task_whose_flush_raises_is_not_held_for_a_later_batch():
    """If handing a task on raises (the consumer's guard then refuses its message), the batcher forgets it
    and the unit of prefetch window it took, so it never also goes out with a later batch."""
    consumer = FakeConsumer()
    coalescer = batcher(consumer)
    consumer.children.all_idle = True

    def broken_handle(request: FakeRequest) -> None:
        raise RuntimeError("the pool refused it")

    coalescer.handle = broken_handle
    lone = one_text("lone")
    with pytest.raises(RuntimeError):
        coalescer.add(lone)
    assert coalescer.held == [] and coalescer.held_texts == 0

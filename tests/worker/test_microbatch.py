"""Micro-batching through a real worker and Redis: one-text tasks enqueued together share one encode,
each still gets its own correct result and state, a bad one fails alone, a killed child loses nothing,
and the Ruby client's one-at-a-time enqueues are coalesced the same way."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import psutil
import pytest

from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, WORKER_INFO_TASK
from tests.support.events import EventRecorder
from tests.support.local import redis_client
from tests.support.localstack import REPO_ROOT
from tests.support.ruby_runner import ruby
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
# Long enough that tasks sent in a loop certainly arrive within one wait, on a slow CI host too.
WAIT_MS = 300
SENTENCES = [json.loads(line)["text"] for line in (REPO_ROOT / "data" / "support_tickets.jsonl").open(encoding="utf-8")]
TEXTS = SENTENCES[:12]
LABELS = ["shipping", "billing", "bug report"]


@pytest.fixture(scope="module")
def batching_worker(start_worker):
    """One child, so every coalesced task meets in it, and a wait long enough to coalesce a loop's sends."""
    return start_worker(concurrency=1, microbatch_max_texts=32, microbatch_wait_ms=WAIT_MS)


def batch_counters(worker) -> dict:
    return worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)["microbatch"]


@pytest.fixture(scope="module")
def lone(batching_worker) -> dict:
    """Each text embedded (normalized and not) and classified by a task that ran alone: the reference."""
    app = batching_worker.app
    before = batch_counters(batching_worker)
    reference = {
        "normalized": [app.send_task(EMBED_TASK, args=[[t]]).get(timeout=RESULT_TIMEOUT_S) for t in TEXTS],
        "raw": app.send_task(EMBED_TASK, args=[[TEXTS[1]], False]).get(timeout=RESULT_TIMEOUT_S),
        "classified": app.send_task(CLASSIFY_TASK, args=[[TEXTS[0]], LABELS]).get(timeout=RESULT_TIMEOUT_S),
    }
    assert batch_counters(batching_worker)["batches_run"] == before["batches_run"], "the reference ran batched"
    embedded = zip(TEXTS, reference["normalized"], strict=True)
    reference["vectors"] = {text: np.array(result["embeddings"][0]) for text, result in embedded}
    return reference


def test_one_text_tasks_sent_together_share_an_encode_and_each_gets_its_own_result(batching_worker, lone):
    app = batching_worker.app
    before = batch_counters(batching_worker)
    embeds = [app.send_task(EMBED_TASK, args=[[text]]) for text in TEXTS[:6]]
    bad = app.send_task(EMBED_TASK, args=[[""]])
    embeds += [app.send_task(EMBED_TASK, args=[[text]]) for text in TEXTS[6:]]
    raw = app.send_task(EMBED_TASK, kwargs={"texts": [TEXTS[1]], "normalize": False})
    classified = app.send_task(CLASSIFY_TASK, kwargs={"texts": [TEXTS[0]], "labels": LABELS})

    for text, result in zip(TEXTS, embeds, strict=True):
        vector = np.array(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"][0])
        np.testing.assert_allclose(vector, lone["vectors"][text], atol=1e-5)
    np.testing.assert_allclose(
        raw.get(timeout=RESULT_TIMEOUT_S)["embeddings"][0], lone["raw"]["embeddings"][0], rtol=1e-4, atol=1e-5
    )
    [prediction] = classified.get(timeout=RESULT_TIMEOUT_S)
    [expected] = lone["classified"]
    assert prediction["label"] == expected["label"]
    assert prediction["scores"] == pytest.approx(expected["scores"], abs=1e-5)
    with pytest.raises(Exception, match=r"inference\.embed: texts\[0\] is empty or blank"):
        bad.get(timeout=RESULT_TIMEOUT_S)
    assert bad.state == "FAILURE" and all(r.state == "SUCCESS" for r in [*embeds, raw, classified])

    after = batch_counters(batching_worker)
    assert after["batches_run"] > before["batches_run"]
    assert after["largest_batch"] >= 8, after  # 15 tasks sent within one wait; allow a split on a slow host


def command_calls(redis) -> dict[str, int]:
    """Redis' count of calls per command (INFO commandstats), server-wide."""
    return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in redis.info("commandstats").items()}


def published_until_quiet(pubsub) -> list[dict]:
    """Every message the subscription has received, read until none arrives for a moment."""
    messages = []
    while (message := pubsub.get_message(timeout=0.5)) is not None:
        messages.append(message)
    return messages


def test_a_batch_records_each_started_once_before_its_success_and_sends_its_events_in_few_messages(
    batching_worker, lone
):
    """A batch's STARTED states are written together as its shared encode begins: each task's
    state channel carries STARTED once, then SUCCESS. Its task events (received, started,
    succeeded) all arrive, in a few `task.multi` messages published on a timer, where Celery's
    flush at every turn of the event loop sends at least one per task received."""
    app = batching_worker.app
    before = batch_counters(batching_worker)
    redis = redis_client(batching_worker.redis_url)
    commands_before = command_calls(redis)
    pubsub = redis.pubsub()
    pubsub.psubscribe("celery-task-meta-*", "*celeryev/task.multi")
    subscribed = [pubsub.get_message(timeout=5) for _ in range(2)]
    assert [m and m["type"] for m in subscribed] == ["psubscribe", "psubscribe"]
    with EventRecorder(app) as recorder:
        results = [app.send_task(EMBED_TASK, args=[[text]]) for text in TEXTS]
        for result in results:
            assert len(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1
        for kind in ("task-received", "task-started", "task-succeeded"):
            wait_until(
                lambda kind=kind: all(recorder.of_type(kind, r.id) for r in results), 30, f"every task's {kind} event"
            )
        assert all(len(recorder.of_type("task-started", r.id)) == 1 for r in results)
    messages = published_until_quiet(pubsub)
    pubsub.close()
    commands = {name: calls - commands_before.get(name, 0) for name, calls in command_calls(redis).items()}
    assert batch_counters(batching_worker)["batches_run"] > before["batches_run"]

    states: dict[str, list[str]] = {r.id: [] for r in results}
    for message in messages:
        channel = message["channel"].decode()
        if channel.startswith("celery-task-meta-") and channel.removeprefix("celery-task-meta-") in states:
            states[channel.removeprefix("celery-task-meta-")].append(json.loads(message["data"])["status"])
    assert all(sequence == ["STARTED", "SUCCESS"] for sequence in states.values()), states
    event_messages = [m for m in messages if m["channel"].decode().endswith("celeryev/task.multi")]
    assert 1 <= len(event_messages) <= len(TEXTS) // 2, f"{len(event_messages)} task.multi messages"
    # Every message was recorded as unacked and acked (one HDEL each), without a MULTI/EXEC per
    # message for either: kombu's own transport used two per task.
    assert commands.get("hset", 0) >= len(TEXTS) and commands.get("hdel", 0) >= len(TEXTS), commands
    assert commands.get("multi", 0) <= 8, commands  # 2 per task (24) before; now ~1 per batch


def test_a_lone_task_held_while_the_child_is_busy_goes_when_the_child_is_free(batching_worker, lone):
    """The wait runs out while the only child is busy with a long task; the lone task is then sent
    (alone, not as a batch) the moment the child is free."""
    app = batching_worker.app
    before = batch_counters(batching_worker)
    busy = app.send_task(EMBED_TASK, args=[[" ".join(SENTENCES[i : i + 30]) for i in range(16)]])
    wait_until(lambda: busy.state == "STARTED", RESULT_TIMEOUT_S, "the long task to run (it goes at once, alone)")
    result = app.send_task(EMBED_TASK, args=[[TEXTS[3]]]).get(timeout=RESULT_TIMEOUT_S)
    np.testing.assert_allclose(result["embeddings"][0], lone["vectors"][TEXTS[3]], atol=1e-5)
    assert busy.state == "SUCCESS"  # it finished first: the lone task waited for the child
    assert batch_counters(batching_worker)["batches_run"] == before["batches_run"]


def test_a_child_killed_in_the_middle_of_a_batch_loses_nothing(batching_worker):
    """16 long one-text tasks coalesce into one slow encode; the child is killed while it runs;
    every task still succeeds, none twice (the batch's messages go back to the queue; those whose
    result was already stored are not run again)."""
    long_texts = [" ".join(SENTENCES[i : i + 30]) for i in range(16)]
    log_offset = len(batching_worker.log())
    [child] = batching_worker.child_pids()
    cpu_before = sum(psutil.Process(child).cpu_times()[:2])
    results = [batching_worker.app.send_task(EMBED_TASK, args=[[text]]) for text in long_texts]
    wait_until(  # the shared encode is running
        lambda: sum(psutil.Process(child).cpu_times()[:2]) - cpu_before >= 0.5, 60, "the child to start the batch", 0.02
    )
    os.kill(child, signal.SIGKILL)

    for result in results:
        assert len(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1
    assert "WorkerLostError" in batching_worker.log()[log_offset:]  # the batch really was cut short
    succeeded = batching_worker.successes()  # from log lines: a SIGKILL can cut the last one off
    assert max(succeeded[result.id] for result in results) == 1


@pytest.mark.external
def test_one_text_tasks_from_the_ruby_client_are_coalesced_too(batching_worker, lone):
    before = batch_counters(batching_worker)
    report = ruby("single_texts.rb", batching_worker.redis_url, TEXTS=json.dumps(TEXTS[:8]))
    for text, vector in zip(TEXTS[:8], report["vectors"], strict=True):
        np.testing.assert_allclose(vector, lone["vectors"][text], atol=1e-5)
    assert batch_counters(batching_worker)["batches_run"] > before["batches_run"]


def test_batches_keep_flowing_while_every_child_recycles(start_worker):
    """Children recycling every 2 jobs: replacements come up idle without a job finishing, and a
    batch held while both children were leaving must still go out (this once hung forever).

    Batches of at most 4 texts make 80 one-text tasks at least 20 jobs, so the 2 children (2 jobs
    each) must be replaced at least 8 times whatever the timing: recycling under batching is forced,
    not left to luck (with 32-text batches, 80 tasks could coalesce into 3 jobs and no recycle)."""
    worker = start_worker(
        concurrency=2,
        max_tasks_per_child=2,
        max_tasks_per_child_jitter=0,
        microbatch_max_texts=4,
        microbatch_wait_ms=20,
    )
    results = [worker.app.send_task(EMBED_TASK, args=[[text]]) for text in SENTENCES[:80]]
    for result in results:
        assert len(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1
    jobs_at_least, children_at_start, jobs_per_child = 80 // 4, 2, 2
    replacements_at_least = jobs_at_least // jobs_per_child - children_at_start
    wait_until(
        lambda: worker.log().count("child ready") >= children_at_start + replacements_at_least,
        30,
        f"at least {replacements_at_least} replaced children",
    )


def test_a_held_task_is_not_overtaken_forever_by_a_backfill_that_bypasses_batching(start_worker):
    """Full-size tasks go to the pool without being held. Under a steady backfill of them at a lower
    priority, with children recycling, a held one-text task used to wait for a free child that never
    came: every child that finished took the full-size task already queued in the pool, and the next
    one took its place (issue 64's benchmark hung on it). A held task now joins the pool's queue once
    its wait is over: every one-text call is answered while the backfill runs."""
    worker = start_worker(concurrency=2, max_tasks_per_child=10, max_tasks_per_child_jitter=0,
                          microbatch_max_texts=8, microbatch_wait_ms=5)  # fmt: skip
    app, client = worker.app, redis_client(worker.redis_url)
    stop, sent = threading.Event(), []

    def backfill() -> None:
        while not stop.is_set():
            if client.llen("inference:9") < 4:
                batch = [SENTENCES[(len(sent) + i) % len(SENTENCES)] for i in range(8)]
                sent.append(app.send_task(EMBED_TASK, args=[batch], priority=9, ignore_result=True))
            stop.wait(0.002)

    filler = threading.Thread(target=backfill, daemon=True)
    filler.start()
    try:
        wait_until(lambda: len(sent) >= 8, RESULT_TIMEOUT_S, "the backfill to be flowing")
        for index in range(40):
            answer = app.send_task(EMBED_TASK, args=[[SENTENCES[index]]]).get(timeout=30)
            assert len(answer["embeddings"]) == 1
        assert filler.is_alive() and worker.log().count("child ready") > 2  # children were replaced meanwhile
    finally:
        stop.set()
        filler.join(timeout=10)

"""The wire fuzzer: hostile messages from a seeded, structure-aware generator (tests/support/fuzz.py)
pushed straight onto a live worker's queue, every fifth message a valid task. The worker never dies;
each hostile message ends with a reason (dead-lettered, or its task failed) or, where the mutation
left it valid, succeeds; every valid task succeeds; Redis holds nothing unexpected after.

INFERENCE_FUZZ_MESSAGES sets how many (1,000 in the suite; the documented long run, 20,000, in
docs/reliability.md).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import re
import uuid

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, UNACKED_INDEX_KEY, UNACKED_KEY, queue_keys, result_key
from inference_tasks.routing import INFERENCE_QUEUE
from tests.support.fuzz import Fuzzed, hostile_message
from tests.support.local import redis_client
from tests.support.waiting import wait_until
from tests.support.wire import encode, task_message

pytestmark = pytest.mark.worker

MESSAGES = int(os.environ.get("INFERENCE_FUZZ_MESSAGES", "1000"))
VALID_EVERY = 5
PER_EXAMPLE = 10
PUSH_CHUNK = 200
# What Redis may hold after the run: results, the dead-letter list, per-task redelivery counts,
# recent failures, durable claims (a fuzzed message may say it is durable), kombu's queue bindings
# (and the unacked record, but only while it holds something).
EXPECTED_KEYS = re.compile(
    r"^(celery-task-meta-.+|_kombu\.binding.+"
    r"|inference-tasks:(dead-letter|redeliveries:.+|recent-failures|durable-claims:fuzz-.+))$"
)
CORPUS_PAGE = re.compile(r"^inference-tasks:corpus:(fuzz-.+):\d+$")
FINAL = ("SUCCESS", "FAILURE", "REVOKED")


@pytest.fixture(scope="module")
def fuzzed_worker(start_worker):
    return start_worker(concurrency=2, dead_letter_max=10 * MESSAGES + 100)


def outcomes(client, task_ids: list[str]) -> dict[str, dict]:
    found = {}
    for start in range(0, len(task_ids), 500):
        chunk = task_ids[start : start + 500]
        for task_id, raw in zip(chunk, client.mget([result_key(t) for t in chunk]), strict=True):
            meta = json.loads(raw) if raw else {}
            if meta.get("status") in FINAL:
                found[task_id] = meta
    return found


def dead_lettered(client) -> list[dict]:
    return [json.loads(entry) for entry in client.lrange(DEAD_LETTER_KEY, 0, -1)]


def generated(count: int, run: str) -> list[Fuzzed]:
    """`count` hostile messages, seeded: hypothesis draws them PER_EXAMPLE at a time (its first
    examples are the simplest ones, the later ones varied), each with a task id of its own."""
    collected: list[Fuzzed] = []
    numbers = itertools.count()
    # Ids of one length: what is drawn (a truncation point) may depend on the message's length,
    # and hypothesis replays a case with the next id.
    one = st.builds(lambda: f"fuzz-{run}-{next(numbers):07d}").flatmap(hostile_message)

    @settings(
        max_examples=max(1, count // PER_EXAMPLE), derandomize=True, database=None, deadline=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(st.lists(one, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def collect(batch: list[Fuzzed]) -> None:
        collected.extend(batch)

    collect()
    return collected[:count]


def test_hostile_messages_never_stop_the_worker_and_each_ends_with_a_reason(fuzzed_worker):
    client = redis_client(fuzzed_worker.redis_url)
    run = uuid.uuid4().hex[:8]
    hostile = generated(MESSAGES - MESSAGES // VALID_EVERY, run)
    valid: list[str] = []
    pipe = client.pipeline(transaction=False)
    for index, fuzzed in enumerate(hostile):
        if index % (VALID_EVERY - 1) == 0:
            message = task_message("inference.embed", [[f"valid text {index}"]], task_id=f"valid-{run}-{index}")
            valid.append(message["headers"]["id"])
            pipe.lpush(INFERENCE_QUEUE, encode(message))
        pipe.lpush(INFERENCE_QUEUE, fuzzed.raw)
        if len(pipe) >= PUSH_CHUNK:
            pipe.execute()
    pipe.execute()
    known = [f.task_id for f in hostile if f.task_id is not None]
    anonymous = len(hostile) - len(known)

    def settled() -> bool:
        results = outcomes(client, [*valid, *known])
        letters = dead_lettered(client)
        lettered_ids = {entry.get("task_id") for entry in letters}
        unexplained = [t for t in known if t not in results and t not in lettered_ids]
        strangers = sum(1 for entry in letters if entry.get("task_id") not in set(known))
        return all(t in results for t in valid) and not unexplained and strangers >= anonymous

    wait_until(settled, 60 + MESSAGES * 0.15, "every message to end", details=lambda: fuzzed_worker.log()[-3000:])
    wait_until(lambda: not client.hlen(UNACKED_KEY) and not client.zcard(UNACKED_INDEX_KEY), 60, "no unacked record")

    assert fuzzed_worker.process.poll() is None, "the worker died"
    assert "Unrecoverable error" not in fuzzed_worker.log()
    results = outcomes(client, [*valid, *known])
    assert all(results[t]["status"] == "SUCCESS" and len(results[t]["result"]["embeddings"][0]) == 384 for t in valid)
    failures = [results[t] for t in known if t in results and results[t]["status"] == "FAILURE"]
    assert all(meta["result"].get("exc_message") for meta in failures), "a failure without a reason"
    letters = dead_lettered(client)
    assert all(entry.get("reason") for entry in letters), "a dead letter without a reason"
    assert sum(client.llen(key) for key in queue_keys(INFERENCE_QUEUE)) == 0
    unexpected = sorted(key.decode() for key in client.scan_iter() if not EXPECTED_KEYS.match(key.decode()))
    # A mutated body can still be a valid inference.embed_corpus: its pages are its output, and expire.
    pages = [key for key in unexpected if CORPUS_PAGE.match(key)]
    assert all(
        results.get(CORPUS_PAGE.match(key)[1], {}).get("status") == "SUCCESS" and client.ttl(key) > 0 for key in pages
    ), "corpus pages of a task that did not succeed, or that never expire"
    assert not [key for key in unexpected if key not in pages], unexpected[:20]
    kinds = collections.Counter(f.mutation.split(" ")[0] for f in hostile)
    states = collections.Counter(meta["status"] for meta in results.values())
    print(
        f"\n[fuzzer] {len(valid) + len(hostile)} messages ({len(valid)} valid, {len(hostile)} hostile: {dict(kinds)}); "
        f"results {dict(states)}; dead letters {len(letters)} ({anonymous} without a usable id)"
    )

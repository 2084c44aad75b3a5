"""The faults the chaos soak injects, and its seeded schedule.

Each fault kind of the fault suite (docs/reliability.md) is one function that does the fault and
waits until the fleet has recovered from it (a killed worker restarted and ready, a new primary
named and the dead node back as a replica, a healed link, Redis given its memory back); it returns
an event for the report and the timeline. Faults on the same worker host take turns (a host lock);
different hosts, Redis and the wire can be hit at once, and the schedule packs them so that they are.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from benchmarks.harness.chaos.fleet import Fleet, FleetWorker
from benchmarks.harness.chaos.ledger import Ledger
from inference_tasks.redis_access.keys import queue_keys
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.wire import encode, task_message

KINDS = (
    "child-kill",  # SIGKILL one pool child that is running a task
    "worker-kill",  # SIGKILL a whole worker, then start it again
    "rolling-restart",  # every worker in turn: SIGTERM, wait, start
    "primary-kill",  # SIGKILL the Redis primary: Sentinel fails over; the node comes back as a replica
    "partition",  # a worker host's link cut, then healed
    "redis-full",  # the primary at maxmemory (noeviction) for a while
    "malformed",  # hostile messages pushed straight onto the queue
)
# Faults that can make a task run again: it was held by a process or connection that died, its lease
# ran out while its worker could not renew it, or its result could not be stored (a full Redis).
HOLDING_FAULTS = ("child-kill", "worker-kill", "rolling-restart", "primary-kill", "partition", "redis-full")
PROMOTION_TIMEOUT_S = 60


@dataclass
class FaultTimes:
    """How long the lasting faults last (the full soak: a minute at maxmemory, as the issue asks)."""

    partition_s: float = 20.0
    redis_full_s: float = 60.0


@dataclass
class Event:
    kind: str
    target: str
    start: float
    end: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def schedule(kinds: list[str], rounds: int, span_s: float, seed: int) -> list[tuple[float, str]]:
    """(offset, kind) for every kind `rounds` times, shuffled per round, spread over `span_s` with
    jitter so that neighbours overlap; seeded, so a run can be repeated."""
    rng = random.Random(seed)
    plan = []
    for _ in range(rounds):
        order = list(kinds)
        rng.shuffle(order)
        plan += order
    step = span_s / max(len(plan), 1)
    return [(round(index * step + rng.uniform(0, step * 0.5), 2), kind) for index, kind in enumerate(plan)]


class Injector:
    def __init__(self, fleet: Fleet, ledger: Ledger, times: FaultTimes, seed: int) -> None:
        self.fleet, self.ledger, self.times = fleet, ledger, times
        self.rng = random.Random(seed)
        self.events: list[Event] = []
        self.errors: list[str] = []
        self.host_locks = {worker.name: threading.Lock() for worker in fleet.workers}
        self.redis_lock = threading.Lock()  # one primary kill or maxmemory change at a time
        self.threads: list[threading.Thread] = []

    def run(self, plan: list[tuple[float, str]], began: float) -> None:
        """Start each fault at its offset from `began`, each in its own thread; returns once all ended."""
        for offset, kind in plan:
            delay = began + offset - time.time()
            if delay > 0:
                time.sleep(delay)
            thread = threading.Thread(target=self._one, args=(kind,), daemon=True)
            thread.start()
            self.threads.append(thread)
        for thread in self.threads:
            thread.join(timeout=600)

    def _one(self, kind: str) -> None:
        action: Callable[[], Event] = getattr(self, kind.replace("-", "_"))
        try:
            self.events.append(action())
        except Exception as error:  # noqa: BLE001 - a fault that could not be done is reported
            self.errors.append(f"{kind}: {type(error).__name__}: {error}")

    def _pick(self, candidates: list[FleetWorker] | None = None) -> FleetWorker:
        return self.rng.choice(candidates or self.fleet.workers)

    def child_kill(self) -> Event:
        worker = self._pick()
        with self.host_locks[worker.name]:
            event = Event("child-kill", worker.name, time.time())
            children = worker.child_pids()
            if children:
                import os
                import signal

                os.kill(self.rng.choice(children), signal.SIGKILL)
                event.details["killed"] = 1
            event.end = time.time()
            return event

    def worker_kill(self) -> Event:
        worker = self._pick()
        with self.host_locks[worker.name]:
            event = Event("worker-kill", worker.name, time.time())
            worker.kill()
            time.sleep(1.0)
            worker.start()
            worker.wait_ready()
            event.end = time.time()
            return event

    def rolling_restart(self) -> Event:
        event = Event("rolling-restart", ",".join(worker.name for worker in self.fleet.workers), time.time())
        codes = []
        for worker in self.fleet.workers:
            with self.host_locks[worker.name]:
                codes.append(worker.stop())
                worker.start()
                worker.wait_ready()
        event.details["exit_codes"] = codes
        event.end = time.time()
        return event

    def primary_kill(self) -> Event:
        with self.redis_lock:
            cluster = self.fleet.cluster
            old = self.fleet.primary_port()
            event = Event("primary-kill", f"redis:{old}", time.time())
            node = next(n for n in [cluster.primary, cluster.replica, *cluster.more_replicas] if n.port == old)
            node.process.kill()
            node.process.wait(timeout=10)
            deadline = time.time() + PROMOTION_TIMEOUT_S
            new = None
            while time.time() < deadline:
                new = self.fleet.primary_port()
                if new not in (None, old):
                    break
                time.sleep(0.1)
            event.details["promoted_after_s"] = round(time.time() - event.start, 2)
            if new in (None, old):
                raise RuntimeError(f"no replica promoted within {PROMOTION_TIMEOUT_S} s")
            assert new is not None
            self.fleet.restart_node(old, new)
            event.end = time.time()
            return event

    def partition(self) -> Event:
        network = self.fleet.network
        if network is None:
            raise RuntimeError("no simulated hosts here (not root): nothing to partition")
        worker = self._pick()
        assert worker.host is not None
        with self.host_locks[worker.name]:
            event = Event("partition", worker.name, time.time())
            network.cut(worker.host)
            time.sleep(self.times.partition_s)
            network.heal(worker.host)
            event.end = time.time()
            return event

    def redis_full(self) -> Event:
        with self.redis_lock:
            client = self.fleet.primary_client()
            used = int(client.info("memory")["used_memory"])
            event = Event("redis-full", f"redis:{self.fleet.primary_port()}", time.time())
            # Just under what it holds: every write that adds memory is refused (noeviction) until
            # reads and deletes (results read once) make room, and then again soon after.
            limit = max(used - 64 * 1024, 1024 * 1024)
            client.config_set("maxmemory", str(limit))
            event.details["maxmemory"] = limit
            time.sleep(self.times.redis_full_s)
            client.config_set("maxmemory", "0")
            event.end = time.time()
            return event

    def malformed(self) -> Event:
        """Hostile messages: each refused (dead-lettered, its FAILURE stored where it has an id) or
        failed by its task; the ledger expects a FAILURE for each one that has an id."""
        event = Event("malformed", "wire", time.time())
        messages = hostile_messages()
        for task_id, raw in messages:
            deadline = time.time() + 120
            while True:  # a hostile producer retries like any other (Redis full, a failover)
                try:
                    self.fleet.primary_client().lpush(queue_keys(INFERENCE_QUEUE)[0], raw)
                    break
                except redis.RedisError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.2)
            if task_id is not None:
                self.ledger.sent(task_id, "malformed", expect_failure=True)
        event.details["messages"] = len(messages)
        event.end = time.time()
        return event


def hostile_messages() -> list[tuple[str | None, bytes]]:
    """A handful of the classes the fuzzer and the poison-message suite found: a name producers may not
    run, a pickle, a body that is not base64, texts of the wrong type, stamped_headers as a number
    (once a worker killer), nesting past the limit, and bytes that are not JSON."""

    def message(change: Callable[[dict[str, Any]], None], args: list[Any] | None = None) -> tuple[str, bytes]:
        task_id = f"chaos-hostile-{uuid.uuid4()}"
        built = task_message(EMBED_TASK, args if args is not None else [["hostile neighbour"]], task_id=task_id)
        change(built)
        return task_id, encode(built)

    def named(built: dict[str, Any]) -> None:
        built["headers"]["task"] = "celery.backend_cleanup"

    def pickled(built: dict[str, Any]) -> None:
        built["content-type"] = "application/x-python-serialize"

    def not_base64(built: dict[str, Any]) -> None:
        built["body"] = "%%% not base64 %%%"

    def stamped(built: dict[str, Any]) -> None:
        built["headers"]["stamped_headers"] = 7

    def deep(built: dict[str, Any]) -> None:
        nested: Any = "x"
        for _ in range(200):
            nested = [nested]
        built["body"] = base64.b64encode(json.dumps([[nested], {}, {}]).encode()).decode()

    return [
        message(named),
        message(pickled),
        message(not_base64),
        message(lambda _: None, args=[5]),  # texts must be a list of strings
        message(stamped),
        message(deep),
        (None, b"\x00\xffnot json at all"),
    ]

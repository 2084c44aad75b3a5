"""Every task the chaos soak sends, and what became of it.

A task enters the ledger when its push returned (the producer's promise starts there); the collector
reads final states from the current primary every few hundred milliseconds, the way the clients do
(read once, then deleted), collects the reply jobs workers push for tasks that asked for one, and
samples Redis memory, queue depth and the unacked record once a second for the timeline.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import redis

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, UNACKED_KEY, queue_keys, result_key, sidekiq_queue_key
from inference_tasks.routing import INFERENCE_QUEUE, TRAINING_QUEUE

FINAL_STATES = ("SUCCESS", "FAILURE", "REVOKED")
REPLY_QUEUE = "chaos-replies"
COLLECT_EVERY_S = 0.3
SAMPLE_EVERY_S = 1.0
MGET_CHUNK = 500


@dataclass
class Entry:
    kind: str
    sent_at: float
    expect_failure: bool = False
    state: str | None = None
    done_at: float | None = None
    replies: int = 0


@dataclass
class Ledger:
    entries: dict[str, Entry] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    send_errors: dict[str, int] = field(default_factory=dict)
    send_error_examples: dict[str, str] = field(default_factory=dict)
    # Reply jobs collected before their task entered the ledger, by task id. A push confirmed late (a
    # producer's retry after NotReplicated, with the same id) enters the ledger when the retry returns,
    # and the worker may have run the first message and pushed its reply before then: that reply is
    # the task's, and counting it only once the task is known lost it (the quick run's "reply job per
    # run" flake, one run in seven).
    early_replies: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, task_id: str, kind: str, expect_failure: bool = False, at: float | None = None) -> None:
        with self.lock:
            entry = Entry(kind, time.time() if at is None else at, expect_failure)
            entry.replies = self.early_replies.pop(task_id, 0)
            self.entries[task_id] = entry

    def send_error(self, error: BaseException | str) -> None:
        """Count a refused send by kind; the first of each kind keeps its traceback, for the report."""
        name = error if isinstance(error, str) else type(error).__name__
        with self.lock:
            self.send_errors[name] = self.send_errors.get(name, 0) + 1
            if not isinstance(error, str) and name not in self.send_error_examples:
                self.send_error_examples[name] = "".join(traceback.format_exception(error))[-2000:]

    def pending(self) -> list[str]:
        with self.lock:
            return [task_id for task_id, entry in self.entries.items() if entry.state is None]

    def finished(self, task_id: str, state: str, done_at: float) -> None:
        with self.lock:
            entry = self.entries.get(task_id)
            if entry is not None and entry.state is None:
                entry.state, entry.done_at = state, done_at

    def replied(self, task_id: str) -> None:
        with self.lock:
            if task_id in self.entries:
                self.entries[task_id].replies += 1
            else:
                self.early_replies[task_id] = self.early_replies.get(task_id, 0) + 1

    def completed(self) -> int:
        with self.lock:
            return sum(1 for entry in self.entries.values() if entry.state is not None)


class Collector:
    """A thread reading final states, reply jobs and samples until stopped; survives failovers (a
    failed read is retried on whatever primary the sentinels name next)."""

    def __init__(self, ledger: Ledger, primary: Any) -> None:
        self.ledger = ledger
        self.primary = primary  # () -> a redis client on the current primary
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.read_errors = 0

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        client = self.primary()
        next_sample = 0.0
        while not self.stop_event.is_set():
            try:
                self.collect(client)
                if time.time() >= next_sample:
                    self.sample(client)
                    next_sample = time.time() + SAMPLE_EVERY_S
            except (redis.RedisError, OSError):
                self.read_errors += 1
                time.sleep(0.2)
                with contextlib.suppress(redis.RedisError, OSError):
                    client = self.primary()
            self.stop_event.wait(COLLECT_EVERY_S)

    def collect(self, client: redis.Redis) -> None:
        pending = self.ledger.pending()
        for start in range(0, len(pending), MGET_CHUNK):
            chunk = pending[start : start + MGET_CHUNK]
            finished = []
            for task_id, raw in zip(chunk, client.mget([result_key(i) for i in chunk]), strict=True):
                meta = json.loads(raw) if raw else {}
                if meta.get("status") in FINAL_STATES:
                    done = (
                        datetime.fromisoformat(meta["date_done"]).timestamp() if meta.get("date_done") else time.time()
                    )
                    self.ledger.finished(task_id, meta["status"], done)
                    finished.append(result_key(task_id))
            if finished:
                client.delete(*finished)  # read once, as the clients do: Redis memory stays flat
        # LPOP with a count, not LRANGE + DEL in MULTI: at maxmemory Redis refuses everything inside
        # MULTI, while a pop (it frees memory) still works.
        while jobs := client.lpop(sidekiq_queue_key(REPLY_QUEUE), MGET_CHUNK):
            for job in jobs:
                self.ledger.replied(json.loads(job)["args"][0]["task_id"])

    def sample(self, client: redis.Redis) -> None:
        with client.pipeline(transaction=False) as pipe:
            pipe.info("memory")
            for key in [*queue_keys(INFERENCE_QUEUE), *queue_keys(TRAINING_QUEUE)]:
                pipe.llen(key)
            pipe.hlen(UNACKED_KEY)
            pipe.dbsize()
            pipe.memory_usage(DEAD_LETTER_KEY)
            memory, *depths, unacked, keys, dead_letters = pipe.execute()
        self.ledger.samples.append(
            {
                "at": time.time(),
                "used_memory": int(memory["used_memory"]),
                # The replication backlog and replicas' buffers (one shared buffer in Redis 7): kept by
                # design, growing with writes up to repl-backlog-size (1 MB) after each failover.
                "replication_buffers": int(memory.get("mem_total_replication_buffers", 0)),
                # What Redis keeps by design, for memory net of it (chaos.py, "redis_memory").
                "keys": int(keys),
                "dead_letter_bytes": int(dead_letters or 0),
                "queued": int(sum(depths)),
                "unacked": int(unacked),
                "completed": self.ledger.completed(),
            }
        )

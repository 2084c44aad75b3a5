"""The chaos soak's mixed load: Python producer threads (one-text embeds with bursts, 64-text embeds,
zero-shot classify, one-text embeds that ask for a Sidekiq reply job), a Ruby producer process, and
one training job. Every push is durable (Redis WAIT for a replica) and retried with the same task id
through whatever the faults do (NotReplicated, RedisFull, a lost connection), as docs/reliability.md
tells producers to; a task enters the ledger once its push returned.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.chaos.ledger import REPLY_QUEUE, Ledger
from benchmarks.harness.workload import REPO_ROOT, make_batches
from inference_tasks import producer
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, TRAIN_CLASSIFIER_TASK, TRAINING_QUEUE
from tests.support import localstack

RUBY_PRODUCER = Path(__file__).resolve().parents[2] / "chaos_producer.rb"
LABELS = ["billing", "login problem", "shipping delay"]
RETRY_PAUSE_S = 0.2
GIVE_UP_S = 120  # a push still refused after this long is counted as never sent


@dataclass(frozen=True)
class Stream:
    """One producer thread: `kind` tasks at `rate` per second, `burst` at once every `burst_every_s`."""

    kind: str
    rate: float
    burst: int = 0
    burst_every_s: float = 0.0


def default_streams(scale: float = 1.0) -> list[Stream]:
    return [
        Stream("embed-1", 4.0 * scale, burst=20, burst_every_s=15.0),
        Stream("embed-64", 0.3 * scale),
        Stream("classify", 1.0 * scale),
        Stream("reply", 1.0 * scale),
    ]


class PythonProducers:
    def __init__(self, url: str, master: str, ledger: Ledger, streams: list[Stream]) -> None:
        self.url, self.master, self.ledger, self.streams = url, master, ledger, streams
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self._produce, args=(stream,), daemon=True) for stream in streams]
        self.apps: list[Any] = []
        self.texts = [text for batch in make_batches(40, 64, seed=7) for text in batch]
        self._counter = itertools.count()

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=GIVE_UP_S + 30)

    def _task(self, kind: str) -> tuple[str, list[Any], dict[str, Any]]:
        n = next(self._counter)
        if kind == "embed-64":
            start = (n * 64) % (len(self.texts) - 64)
            return EMBED_TASK, [self.texts[start : start + 64]], {}
        if kind == "classify":
            return CLASSIFY_TASK, [[self.texts[n % len(self.texts)]], LABELS], {}
        if kind == "reply":
            reply = {"class": "ChaosReplyJob", "queue": REPLY_QUEUE}
            return EMBED_TASK, [[self.texts[n % len(self.texts)]]], {"headers": {"sidekiq_reply": reply}}
        return EMBED_TASK, [[self.texts[n % len(self.texts)]]], {}

    def _produce(self, stream: Stream) -> None:
        app = localstack.producer_app(self.url, redis_sentinel_master=self.master)
        self.apps.append(app)
        next_burst = time.time() + stream.burst_every_s if stream.burst else float("inf")
        while not self.stop_event.is_set():
            count = 1
            if time.time() >= next_burst:
                count, next_burst = stream.burst, time.time() + stream.burst_every_s
            for _ in range(count):
                self.send(app, stream.kind)
            self.stop_event.wait(1.0 / stream.rate)

    def send(self, app: Any, kind: str, task: tuple[str, list[Any], dict[str, Any]] | None = None,
             **options: Any) -> str | None:  # fmt: skip
        """Push one task durably, retrying with the same id until it is confirmed; its id, or None if
        it never was within GIVE_UP_S (counted as a send error, not as a task)."""
        name, args, extra = task or self._task(kind)
        task_id = str(uuid.uuid4())
        deadline = time.time() + GIVE_UP_S
        while time.time() < deadline:
            try:
                producer.send(app, name, args=args, task_id=task_id, durable=True, **extra, **options)
                self.ledger.sent(task_id, kind)
                return task_id
            except Exception as error:  # noqa: BLE001 - every refusal is counted, then retried
                self.ledger.send_error(error)
                time.sleep(RETRY_PAUSE_S)
        self.ledger.send_error("gave up")
        return None

    def train_once(self, tickets: list[dict[str, str]]) -> str | None:
        """The one training job: a head on the support tickets, on the trainer's queue."""
        app = localstack.producer_app(self.url, redis_sentinel_master=self.master)
        self.apps.append(app)
        texts = [ticket["text"] for ticket in tickets]
        labels = [ticket["label"] for ticket in tickets]
        task = (TRAIN_CLASSIFIER_TASK, ["chaos-head", texts, labels], {})
        return self.send(app, "train", task, queue=TRAINING_QUEUE)


class RubyProducer:
    """benchmarks/chaos_producer.rb: durable one-text embeds from the Ruby client through the sentinels;
    it writes one JSON line per confirmed push, which `drain` adds to the ledger."""

    def __init__(self, ports: list[int], master: str, rate: float, workdir: Path) -> None:
        self.out = workdir / "ruby-sent.jsonl"
        self.log = workdir / "ruby-producer.log"
        env = localstack.clean_env(
            os.environ, SENTINEL_PORTS=",".join(map(str, ports)), SENTINEL_MASTER=master, RATE=str(rate),
            OUT=str(self.out), STOP=str(workdir / "ruby-stop"),
        )  # fmt: skip
        self.stop_file = workdir / "ruby-stop"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(["ruby", str(RUBY_PRODUCER)], env=env, cwd=REPO_ROOT, stdout=log,
                                            stderr=subprocess.STDOUT)  # fmt: skip
        self._read = 0

    def drain(self, ledger: Ledger) -> None:
        if not self.out.exists():
            return
        lines = self.out.read_text().splitlines()
        for line in lines[self._read :]:
            if line.strip():
                record = json.loads(line)
                if record.get("error"):
                    ledger.send_error(f"ruby {record['error']}")
                else:
                    ledger.sent(record["id"], "ruby", at=record["sent_at"])
        self._read = len(lines)

    def stop(self, ledger: Ledger) -> dict[str, Any]:
        self.stop_file.write_text("stop")
        try:
            self.process.wait(timeout=GIVE_UP_S + 30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.drain(ledger)
        tail = self.log.read_text(errors="replace").strip().splitlines()
        return json.loads(tail[-1]) if tail and tail[-1].startswith("{") else {"exit": self.process.returncode}

"""Whether each override kept only for speed still pays: ours and upstream's, alternated, in one run.

Three overrides of kombu/Celery methods exist only to save the worker's main process time
(docs/upstream.md, "Private names we use"); each costs coupling to a pinned upstream. On a real
redis-server on loopback, this times, on the same objects and alternately (the host drifts):

- kombu's `Channel.conn_or_acquire` builds a new redis.Redis for every ack, unacked record and event
  published; ours hands out one client per connection pool. Timed: one command (ZREM, as an ack
  sends) through a client from each.
- kombu's `QoS.ack` removes each acked message from the unacked records in a MULTI/EXEC of its own;
  ours writes the acks made in one turn of the event loop together (a micro-batch's 64 tasks: one
  pipeline). Timed: the acks of a 64-task batch each way (for a lone task both are one round trip).
- Celery's `BaseKeyValueStoreBackend._store_result` reads the stored state, then writes (two round
  trips); ours does both in one Lua script. Timed: storing a one-text task's SUCCESS through each.

    .venv/bin/python -m benchmarks.overrides [--seconds 1.0] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery.backends.redis import RedisBackend
from kombu import Connection
from kombu.transport import redis as kombu_redis

from benchmarks.harness.report import cpu_name
from benchmarks.harness.runner import per_call_us
from inference_tasks.app import create_app
from inference_tasks.broker.transport import Channel, Transport
from inference_tasks.config import Settings
from tests.support.localstack import start_redis

ONE_TEXT_RESULT = {"model": "all-MiniLM-L6-v2", "dim": 384, "embeddings": [[0.0123456789] * 384]}


def alternate(pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]], seconds: float, rounds: int) -> None:
    print(f"{'override':<34} {'upstream us':>12} {'ours us':>9} {'saved us':>9} {'ours / upstream':>16}")
    for name, (upstream, ours) in pairs.items():
        theirs_us, ours_us = [], []
        for _ in range(rounds):
            theirs_us.append(per_call_us(upstream, seconds))
            ours_us.append(per_call_us(ours, seconds))
        theirs, mine = statistics.median(theirs_us), statistics.median(ours_us)
        print(f"{name:<34} {theirs:>12.1f} {mine:>9.1f} {theirs - mine:>9.1f} {mine / theirs:>16.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="alternations; the median is printed")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        server = start_redis(Path(workdir))
        try:
            url = server.url()
            connection = Connection(url, transport=Transport)
            channel = connection.default_channel
            assert isinstance(channel, Channel)
            backend = create_app(Settings(redis_url=url)).backend
            qos = channel.qos
            tags = [str(uuid.uuid4()) for _ in range(64)]

            def zrem_through(acquired: Any) -> None:
                with acquired as client:
                    client.zrem("unacked_index", "tag")

            def acks_one_by_one() -> None:
                for tag in tags:
                    kombu_redis.QoS._remove_from_indices(qos, tag).execute()

            def acks_together() -> None:
                qos.remove_records(tags)

            pairs = {
                "Channel.conn_or_acquire (ZREM)": (
                    lambda: zrem_through(kombu_redis.Channel.conn_or_acquire(channel)),
                    lambda: zrem_through(channel.conn_or_acquire()),
                ),
                "QoS.ack (64 acks of a micro-batch)": (acks_one_by_one, acks_together),
                "_store_result (one-text SUCCESS)": (
                    # A new task each time: for a task already SUCCESS both skip the write.
                    lambda: RedisBackend._store_result(backend, str(uuid.uuid4()), ONE_TEXT_RESULT, "SUCCESS"),
                    lambda: backend._store_result(str(uuid.uuid4()), ONE_TEXT_RESULT, "SUCCESS"),
                ),
            }
            print(f"CPU: {cpu_name()}; redis-server on loopback; median of {options.rounds} alternations")
            alternate(pairs, options.seconds, options.rounds)
            connection.release()
        finally:
            server.process.terminate()
            server.process.wait(10)


if __name__ == "__main__":
    main()

"""Celery's mingle only when another worker can answer (worker/celery_ext/mingle.py): a worker alone on
its Redis database starts without mingle's one-second wait; one started beside it mingles as Celery
does, and the empty message that counted the listeners costs the first one nothing."""

from __future__ import annotations

import socket

import redis

from inference_tasks.config import Settings
from inference_tasks.worker.celery_ext.mingle import nobody_to_mingle_with
from tests.support.localstack import PLAIN_WORKER

SKIPPED = "no other worker listens for broadcasts; starting without mingle"


def test_a_worker_alone_skips_mingle_and_one_beside_it_mingles_with_it(start_worker, fresh_redis_url):
    url = fresh_redis_url()
    first = start_worker(concurrency=1, redis_url=url, command=(*PLAIN_WORKER, "-n", "first@%h"))
    second = start_worker(concurrency=1, redis_url=url, command=(*PLAIN_WORKER, "-n", "second@%h"))
    assert SKIPPED in first.log() and "mingle: searching for neighbors" not in first.log()
    assert SKIPPED not in second.log()
    assert "mingle: sync with 1 nodes" in second.log(), second.log()
    # Both listen now; the count is the two of them (the empty message each start sent is ignored).
    client = redis.Redis.from_url(url)
    db = client.connection_pool.connection_kwargs["db"]
    assert client.publish(f"/{db}.celery.pidbox", "") == 2
    replies = first.app.control.ping(timeout=2.0)
    assert sorted(name.split("@")[0] for reply in replies for name in reply) == ["first", "second"], replies
    assert "Cannot process event" not in first.log() + second.log()


def test_when_redis_cannot_count_the_listeners_the_worker_mingles_as_celery_does():
    """No answer is not "nobody": a refused connection keeps Celery's mingle."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert nobody_to_mingle_with(Settings(redis_url=f"redis://127.0.0.1:{port}/0")) is False

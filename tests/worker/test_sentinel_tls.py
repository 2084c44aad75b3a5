"""Sentinel over TLS (INFERENCE_REDIS_SENTINEL_TLS): three sentinels, a primary and a replica that
listen on TLS only, with a private CA. A worker, the Python app, `status` and the Ruby client reach
the primary through the sentinels, and keep serving after the primary is killed and a replica
promoted over TLS. Results go to a sentinel:// INFERENCE_RESULT_REDIS_URL of their own (database 3
of the same deployment): they follow that URL, through the failover too."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from redis.sentinel import Sentinel

from inference_tasks.app import create_app
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import result_key
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.ruby_runner import ruby
from tests.support.sentinel import start_sentinel_cluster
from tests.support.waiting import wait_until
from tests.support.wire import encode, task_message

RESULT_TIMEOUT_S = 60
# Sentinel's TILT (30 s), a failover-timeout (5 s, twice after an aborted attempt) and the failover.
PROMOTION_TIMEOUT_S = 90


@pytest.mark.worker
@pytest.mark.timeout(300)
@pytest.mark.external
def test_a_fleet_serves_through_sentinels_over_tls_and_follows_a_failover(start_worker, tls_files, tmp_path):
    cluster = start_sentinel_cluster(tmp_path / "sentinel-tls", tls=tls_files)
    try:
        url, results_url = cluster.url(0), cluster.url(3)
        settings = {
            "result_redis_url": results_url,
            "redis_sentinel_master": cluster.master_name,
            "redis_sentinel_tls": True,
            "redis_tls_ca_file": str(tls_files.ca),
        }
        env = clean_env(
            REDIS_URL=url,
            INFERENCE_REDIS_SENTINEL_MASTER=cluster.master_name,
            INFERENCE_REDIS_SENTINEL_TLS="true",
            INFERENCE_RESULT_REDIS_URL=results_url,
            INFERENCE_REDIS_TLS_CA_FILE=str(tls_files.ca),
        )
        worker = start_worker(concurrency=1, redis_url=url, **{key: str(value) for key, value in settings.items()})
        app = create_app(Settings(redis_url=url, **settings))  # type: ignore[arg-type]
        first = app.send_task(EMBED_TASK, args=[["through sentinels over TLS"]])
        before = first.get(timeout=RESULT_TIMEOUT_S)
        over_tls = {"ssl": True, "ssl_ca_certs": str(tls_files.ca)}
        stored_in = [
            db
            for db in (0, 3)
            if redis.Redis(port=cluster.primary.port, db=db, **over_tls).exists(result_key(first.id))
        ]
        status = subprocess.run(
            [sys.executable, "-m", "inference_tasks.ops.cli", "status"],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        ports = ",".join(str(port) for port, _ in cluster.sentinels)
        from_ruby = ruby("sentinel_tls_embed.rb", url, SENTINEL_PORTS=ports, SENTINEL_MASTER=cluster.master_name,
                         CA_FILE=str(tls_files.ca), RESULTS_DB="3")  # fmt: skip
        # Nothing answers in plain text: every connection above was TLS.
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=cluster.sentinels[0][0], socket_timeout=2).ping()
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=cluster.primary.port, socket_timeout=2).ping()
        old_primary = cluster.primary.port
        cluster.kill_primary()

        # A failover takes seconds, but a sentinel that sees its host stall (2 s without its timer,
        # a busy CI host) enters TILT and holds every failover for 30 s; the first attempt after it
        # may abort (the replica's state is stale) and wait a failover-timeout. Seen once in CI: TILT
        # 6 s before the kill, an aborted attempt 24 s after it, the next one due 10 s later.
        # Promoted as a producer sees it: redis-py's discovery (every sentinel asked in turn, a master
        # flagged down or not yet a master skipped), not one sentinel's answer. CI once sent the next
        # task the moment the first sentinel named the new primary and got "No master found".
        sentinels = Sentinel(
            [("127.0.0.1", port) for port, _ in cluster.sentinels], sentinel_kwargs={"socket_timeout": 1, **over_tls}
        )

        def replica_promoted() -> bool:
            try:
                return sentinels.discover_master(cluster.master_name)[1] != old_primary
            except redis.RedisError:
                return False

        wait_until(replica_promoted, PROMOTION_TIMEOUT_S, "a sentinel to promote the replica")
        second = app.send_task(EMBED_TASK, args=[["after the failover, over TLS"]])
        after = second.get(timeout=RESULT_TIMEOUT_S)
        # Still our transport after the failover: a task producers may not send is refused unread
        # (kombu's own transport, which its URL failover used to switch to, would run it).
        hostile = task_message("celery.backend_cleanup", [])
        redis.Redis(port=cluster.master_port(), **over_tls).lpush(INFERENCE_QUEUE, encode(hostile))
        refused = app.AsyncResult(hostile["headers"]["id"])
        wait_until(lambda: refused.state == "FAILURE", RESULT_TIMEOUT_S, "the hostile message to be refused")
        promoted = redis.Redis(port=cluster.master_port(), db=3, **over_tls)
        stored_after = promoted.exists(result_key(second.id))
        worker.stop()
    finally:
        cluster.stop()
    assert before["dim"] == after["dim"] == 384
    assert "is not a task producers may send" in str(refused.result)
    assert "Unrecoverable error" not in worker.log()
    assert stored_in == [3] and stored_after == 1
    assert status.returncode == 0, status.stdout + status.stderr
    assert from_ruby == {"dim": 384, "count": 1}

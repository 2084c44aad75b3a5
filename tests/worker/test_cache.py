"""The fleet's embedding cache through a real worker (INFERENCE_CACHE_URL): a cache Redis of its own,
run with allkeys-lru, reached over TLS (a private CA) and loaded with `inference-tasks acl` (the worker
reaches it as inference-cache).
A second send of the same texts is answered bit for bit from the cache, at a fraction of the model's
time; every output form comes from the one entry; a prompt is another entry; garbage is recomputed;
`cache=false` bypasses it; classify, rerank, chunks and micro-batches read it; worker_info, the
exporter, doctor and status show it; a stopped cache costs speed only, and a cache on the broker's
server stops the worker at start."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from inference_tasks.ops.acl import ROLES
from inference_tasks.redis_access.keys import CACHE_KEY_PREFIX
from inference_tasks.routing import CLASSIFY_TASK, EMBED_CHUNKS_TASK, EMBED_TASK, RERANK_TASK, WORKER_INFO_TASK
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT, start_redis
from tests.support.operator_tools import exporter, scrape
from tests.support.ruby_runner import ruby
from tests.support.tickets import dataset
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker

PASSWORDS = {role: f"{role}-cache-secret" for role in ROLES}
ADMIN = "user admin on >admin-secret ~* &* +@all\n"
TTL_S = 3600
RESULT_TIMEOUT_S = 120
TICKETS = dataset()[0][:64]


def acl_cache_redis(workdir, tls, port: int | None = None):
    """A TLS cache Redis (maxmemory, allkeys-lru) loaded with `inference-tasks acl` plus the tests' admin."""
    environment = {f"INFERENCE_ACL_PASSWORD_{role.upper()}": password for role, password in PASSWORDS.items()}
    printed = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "acl"], cwd=REPO_ROOT, env=clean_env(**environment),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "users.acl").write_text(printed.stdout + ADMIN)
    options = ("--aclfile", str(workdir / "users.acl"), "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
    return start_redis(workdir, tls=tls, port=port, extra_args=options)


@dataclass
class CacheRedis:
    """The module's cache server and how to reach it: as the workers' inference-cache user, or as admin."""

    server: Any
    ca: str

    @property
    def url(self) -> str:
        return f"rediss://inference-cache:{PASSWORDS['cache']}@127.0.0.1:{self.server.port}/0"

    def admin(self) -> redis.Redis:
        return redis.Redis(port=self.server.port, username="admin", password="admin-secret", ssl=True,
                           ssl_ca_certs=self.ca)  # fmt: skip

    def keys(self) -> list[bytes]:
        return list(self.admin().scan_iter(f"{CACHE_KEY_PREFIX}*"))


@pytest.fixture(scope="module")
def cache_server(tmp_path_factory, tls_files):
    cache = CacheRedis(acl_cache_redis(tmp_path_factory.mktemp("cache"), tls_files), str(tls_files.ca))
    yield cache
    if cache.server.process.poll() is None:
        cache.server.process.terminate()
        cache.server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def worker(start_worker, cache_server):
    return start_worker(concurrency=1, cache_url=cache_server.url, cache_ttl_s=TTL_S, redis_tls_ca_file=cache_server.ca)


def embed(worker, texts, **options):
    return worker.app.send_task(EMBED_TASK, args=[texts], kwargs=options).get(timeout=RESULT_TIMEOUT_S)


@pytest.fixture(scope="module")
def first_sent(worker):
    """The 64 tickets sent once (every one a miss), then again."""
    return embed(worker, TICKETS), embed(worker, TICKETS)


def test_a_second_send_is_answered_bit_exact_from_the_cache(worker, cache_server, first_sent):
    miss, hit = first_sent
    assert miss["usage"]["cached"] == 0 and hit["usage"]["cached"] == 64
    assert hit["embeddings"] == miss["embeddings"] and hit["dim"] == 384
    # Never the model: a read and a decode against a 64-text forward pass.
    assert hit["usage"]["inference_ms"] <= miss["usage"]["inference_ms"] / 2, (hit["usage"], miss["usage"])
    keys = cache_server.keys()
    assert len(keys) == len(set(TICKETS))
    assert all(0 < cache_server.admin().ttl(key) <= TTL_S for key in keys)
    broker = redis.Redis.from_url(worker.redis_url)
    assert list(broker.scan_iter(f"{CACHE_KEY_PREFIX}*")) == [], "the cache wrote to the broker's Redis"


@pytest.mark.parametrize(
    "options",
    [{"encoding": "f32-base64"}, {"encoding": "int8"}, {"encoding": "ubinary"}, {"dimensions": 128},
     {"encoding": "f32-base64", "dimensions": 64}],
    ids=["f32-base64", "int8", "ubinary", "dimensions", "both"],
)  # fmt: skip
def test_every_output_form_comes_from_the_one_entry(worker, first_sent, options):
    from_cache = embed(worker, TICKETS, **options)
    computed = embed(worker, TICKETS, cache=False, **options)
    assert from_cache["usage"]["cached"] == 64 and computed["usage"]["cached"] == 0
    assert from_cache["embeddings"] == computed["embeddings"] and from_cache["dim"] == computed["dim"]
    if "encoding" in options:
        assert base64.b64decode(from_cache["embeddings"])


def test_a_prompt_misses_and_is_then_cached_on_its_own(worker, first_sent):
    texts = TICKETS[:4]
    assert embed(worker, texts, prompt="query: ")["usage"]["cached"] == 0
    assert embed(worker, texts, prompt="query: ")["usage"]["cached"] == 4
    assert embed(worker, texts, prompt="passage: ")["usage"]["cached"] == 0
    assert embed(worker, texts, normalize=False)["usage"]["cached"] == 0  # another vector: not unit length


def test_entries_overwritten_with_garbage_are_recomputed_never_returned(worker, cache_server, first_sent):
    miss, _ = first_sent
    client = cache_server.admin()
    for index, key in enumerate(cache_server.keys()):
        good = client.get(key)
        client.set(key, [b"garbage", good[:-8], good[:20] + bytes(len(good) - 20)][index % 3], keepttl=True)
    again = embed(worker, TICKETS)
    assert again["usage"]["cached"] == 0 and again["embeddings"] == miss["embeddings"]
    assert embed(worker, TICKETS)["usage"]["cached"] == 64  # overwritten with good entries


def test_the_cache_argument_bypasses_reading_and_writing_and_is_checked(worker, cache_server, first_sent):
    before = len(cache_server.keys())
    private = ["a text that must not be kept anywhere", "another one"]
    assert embed(worker, private, cache=False)["usage"]["cached"] == 0
    assert embed(worker, TICKETS[:3], cache=False)["usage"]["cached"] == 0
    assert len(cache_server.keys()) == before
    refused = worker.app.send_task(EMBED_TASK, args=[private], kwargs={"cache": "no"})
    with pytest.raises(Exception, match="cache must be true or false"):
        refused.get(timeout=RESULT_TIMEOUT_S)


def test_classify_rerank_chunks_and_micro_batches_read_the_cache(worker, first_sent):
    app = worker.app
    rows = app.send_task(CLASSIFY_TASK, args=[TICKETS[:3], ["billing", "delivery"]]).get(timeout=RESULT_TIMEOUT_S)
    assert [row["usage"]["cached"] for row in rows] == [3, 3, 3]  # the task's count, on each row
    ranked = app.send_task(RERANK_TASK, args=["a late parcel", TICKETS[:5]]).get(timeout=RESULT_TIMEOUT_S)
    assert ranked["usage"]["cached"] == 5  # the documents; the query is new
    assert app.send_task(RERANK_TASK, args=["a late parcel", TICKETS[:5]]).get(timeout=RESULT_TIMEOUT_S)[
        "usage"]["cached"] == 6  # fmt: skip
    short = [text for text in TICKETS if len(text) < 200][:2]
    chunks = app.send_task(EMBED_CHUNKS_TASK, args=[short]).get(timeout=RESULT_TIMEOUT_S)
    assert chunks["usage"]["cached"] == 2  # a short text is one chunk: the text itself
    # Sent together, one-text tasks share a micro-batch: its keys are read in one round trip.
    sent = [app.send_task(EMBED_TASK, args=[[text]]) for text in TICKETS[10:30]]
    assert [result.get(timeout=RESULT_TIMEOUT_S)["usage"]["cached"] for result in sent] == [1] * 20
    info = app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert info["microbatch"]["batches_run"] > 0, "no micro-batch ran: the batched path went untested"


def test_worker_info_the_exporter_doctor_and_status_show_the_cache(worker, cache_server, first_sent):
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert info["cache"]["on"] is True and info["cache"]["ttl_s"] == TTL_S
    assert PASSWORDS["cache"] not in str(info)
    with exporter(worker.redis_url) as port:
        metrics = scrape(port)
    labels = next(labels for (name, labels) in metrics if name == "inference_cache_hits_total")
    assert metrics[("inference_cache_hits_total", labels)] >= 64
    assert metrics[("inference_cache_misses_total", labels)] >= 64
    assert metrics[("inference_cache_bytes_total", tuple(sorted((*labels, ("direction", "read")))))] > 64 * 1536
    env = {"REDIS_URL": worker.redis_url, "INFERENCE_CACHE_URL": cache_server.url,
           "INFERENCE_REDIS_TLS_CA_FILE": cache_server.ca}  # fmt: skip
    doctor = subprocess.run([sys.executable, "-m", "inference_tasks.ops.cli", "doctor", "--skip-model"], cwd=REPO_ROOT,
                            env=clean_env(**env), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "cache redis: reachable" in doctor.stdout, doctor.stdout
    assert "cache redis eviction: maxmemory-policy allkeys-lru" in doctor.stdout
    status = subprocess.run([sys.executable, "-m", "inference_tasks.ops.cli", "status"], cwd=REPO_ROOT,
                            env=clean_env(**env), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert status.returncode == 0 and "embedding cache at rediss://inference-cache:***@" in status.stdout
    assert PASSWORDS["cache"] not in doctor.stdout + status.stdout


def test_the_cache_user_reaches_the_cache_keys_only(cache_server):
    client = redis.Redis.from_url(cache_server.url, ssl_ca_certs=cache_server.ca)
    client.set(f"{CACHE_KEY_PREFIX}probe", b"x", ex=5)
    for refused in (lambda: client.set("queue:default", b"x"), client.flushall, lambda: client.keys("*")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()


@pytest.mark.external
def test_the_python_client_and_the_gem_send_the_cache_argument(worker, first_sent):
    from inference_tasks import client

    texts = ["the gem's own texts, never sent before", "and a second one"]
    assert client.embed(worker.app, TICKETS[:2])["usage"]["cached"] == 2
    assert client.embed(worker.app, TICKETS[:2], cache=False)["usage"]["cached"] == 0
    found = ruby("cache_embed.rb", worker.redis_url, TEXTS=json.dumps(texts))
    assert found == {"first": 0, "second": 2, "bypassed": 0, "classify_bypassed": 0, "rerank": 2}


def test_a_stopped_cache_costs_speed_only_and_is_used_again_when_back(
    worker, cache_server, first_sent, tmp_path, tls_files
):
    cache_server.server.process.terminate()
    cache_server.server.process.wait(timeout=10)
    started = time.monotonic()
    served = embed(worker, TICKETS)
    assert served["usage"]["cached"] == 0 and served["embeddings"] == first_sent[0]["embeddings"]
    assert time.monotonic() - started < 30
    assert embed(worker, ["while the cache is down"])["usage"]["cached"] == 0
    assert "embedding cache: read failed" in worker.log()
    cache_server.server = acl_cache_redis(tmp_path / "back", tls_files, port=cache_server.server.port)
    wait_until(lambda: embed(worker, TICKETS[:2])["usage"]["cached"] == 2, 60, "the worker to use the cache again")


def test_a_worker_refuses_a_cache_on_its_brokers_server(start_worker, fresh_redis_url):
    broker = fresh_redis_url()
    other_database = broker.rsplit("/", 1)[0] + "/15"
    refused = start_worker(cache_url=other_database, redis_url=broker, wait_ready=False)
    wait_until(lambda: refused.process.poll() is not None, 60, "the worker to stop")
    assert refused.process.returncode != 0 and "ready." not in refused.log()
    assert "INFERENCE_CACHE_URL is on the server of REDIS_URL" in refused.log()

"""The embedding cache's settings: a URL checked like the other Redis URLs, and a worker that refuses a
cache on the broker's or the results' Redis."""

from __future__ import annotations

import pytest

from inference_tasks.config import ConfigError, Settings
from inference_tasks.worker.lifecycle.cache_start import refuse_cache_on_a_queue_redis
from inference_tasks.worker.lifecycle.start_checks import RefusedToStart

BROKER = "redis://127.0.0.1:6379/0"


def test_the_cache_url_is_checked_like_the_other_redis_urls():
    with pytest.raises(ConfigError, match="INFERENCE_CACHE_URL must be redis://"):
        Settings(cache_url="http://cache:6379")
    with pytest.raises(ConfigError, match="INFERENCE_CACHE_SENTINEL_MASTER"):
        Settings(cache_url="sentinel://10.0.0.1:26379")
    with pytest.raises(ConfigError, match="INFERENCE_CACHE_TTL_S"):
        Settings.from_env({"INFERENCE_CACHE_TTL_S": "0"})
    assert "cache-secret" not in repr(Settings(cache_url="redis://:cache-secret@cache:6379/0"))


@pytest.mark.parametrize(
    ("cache_url", "result_redis_url", "named"),
    [(BROKER, None, "REDIS_URL"), ("redis://:pw@127.0.0.1:6379/5", None, "REDIS_URL"),
     ("redis://results:6379/3", "redis://results/0", "INFERENCE_RESULT_REDIS_URL")],
)  # fmt: skip
def test_a_worker_refuses_a_cache_on_a_redis_that_queues_or_stores_results(cache_url, result_redis_url, named):
    settings = Settings(redis_url=BROKER, cache_url=cache_url, result_redis_url=result_redis_url)
    with pytest.raises(RefusedToStart, match=f"INFERENCE_CACHE_URL is on the server of {named}.*any database"):
        refuse_cache_on_a_queue_redis(settings)


def test_a_cache_of_its_own_is_accepted():
    refuse_cache_on_a_queue_redis(Settings(redis_url=BROKER, cache_url="redis://127.0.0.1:6380/0"))
    refuse_cache_on_a_queue_redis(Settings(redis_url=BROKER, cache_url="redis://cache.internal:6379/0"))


def test_the_cache_client_is_bounded_by_the_timeout_over_tls_and_sentinel():
    from redis.sentinel import SentinelConnectionPool

    from inference_tasks.redis_access.connections import cache_redis

    tls = cache_redis(Settings(cache_url="rediss://:pw@cache:6380/0", cache_timeout_ms=50))
    assert tls.connection_pool.connection_kwargs["socket_timeout"] == 0.05
    assert tls.connection_pool.connection_class.__name__ == "SSLConnection"
    sentinel = cache_redis(Settings(cache_url="sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379/0",
                                    cache_sentinel_master="cache-group"))  # fmt: skip
    pool = sentinel.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "cache-group"
    assert pool.connection_kwargs["socket_timeout"] == 0.1 and pool.connection_kwargs["socket_connect_timeout"] == 0.1

"""The embedding cache around a forward pass (worker/cache/lookup.py, store.py) on a real redis-server,
with a model that counts what it computes: hits never reach it, misses are computed once and written
with the TTL, entries that are not rows are recomputed and overwritten, a bypassing text is neither
read nor written, and a cache that is down or full costs only speed."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import redis

from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import CACHE_KEY_PREFIX
from inference_tasks.worker.cache.identity import DENSE, SPARSE, VectorSpace
from inference_tasks.worker.cache.lookup import VectorCache, rows_through_cache
from inference_tasks.worker.cache.store import CacheStore
from inference_tasks.worker.runtimes.capabilities import SparseRow
from tests.support.localstack import free_port, start_redis

TTL_S = 600


class CountingModel:
    """A dense (or sparse) model whose rows depend on the text alone; `computed` lists what it was asked."""

    backend, precision, max_tokens = "numpy", "f32", 256

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.computed: list[str] = []

    def row(self, text: str) -> np.ndarray:
        return np.random.default_rng(sum(text.encode())).standard_normal(self.dim).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        self.computed += texts
        return np.stack([self.row(text) for text in texts])

    def encode_sparse(self, texts: list[str]) -> list[SparseRow]:
        self.computed += texts
        return [SparseRow(np.array([1, len(text)], dtype=np.int64), self.row(text)[:2]) for text in texts]


def cache_on(url: str, timeout_ms: int = 100) -> VectorCache:
    settings = Settings(redis_url="redis://127.0.0.1:1/0", cache_url=url, cache_ttl_s=TTL_S,
                        cache_timeout_ms=timeout_ms)  # fmt: skip
    return VectorCache(CacheStore(settings), "weights", "mean")


def through(cache: VectorCache, model: CountingModel, texts: list[str], output: str = DENSE, wanted=None):
    space = cache.space(model, output, output == DENSE)
    compute = model.encode if output == DENSE else model.encode_sparse
    return rows_through_cache(cache, space, model, texts, compute, wanted)


@pytest.fixture
def cache_url(fresh_redis_url):
    return fresh_redis_url()


def test_hits_never_reach_the_model_and_misses_are_computed_once_with_the_ttl(cache_url):
    cache, model = cache_on(cache_url), CountingModel()
    texts = ["alpha", "beta", "alpha", "gamma"]
    first, from_cache = through(cache, model, texts)
    assert model.computed == ["alpha", "beta", "gamma"] and from_cache == [False] * 4
    assert first.tobytes() == np.stack([model.row(text) for text in texts]).tobytes()
    second, from_cache = through(cache, model, texts)
    assert model.computed == ["alpha", "beta", "gamma"] and from_cache == [True] * 4
    assert second.tobytes() == first.tobytes()
    client = redis.Redis.from_url(cache_url)
    keys = list(client.scan_iter(f"{CACHE_KEY_PREFIX}*"))
    assert len(keys) == 3 and all(0 < client.ttl(key) <= TTL_S for key in keys)
    tally = cache.store.take_tally()
    assert (tally["hits"], tally["misses"], tally["errors"]) == (4, 4, 0)
    assert tally["bytes_written"] == tally["bytes_read"] * 3 // 4 > 0  # 3 entries written, 4 read
    assert cache.store.take_tally()["hits"] == 0


def test_a_bypassing_text_is_neither_read_nor_written(cache_url):
    cache, model = cache_on(cache_url), CountingModel()
    through(cache, model, ["kept"])
    rows, from_cache = through(cache, model, ["kept", "private"], wanted=[False, False])
    assert from_cache == [False, False] and model.computed == ["kept", "kept", "private"]
    assert redis.Redis.from_url(cache_url).dbsize() == 1
    assert rows[1].tobytes() == model.row("private").tobytes()


def test_entries_that_are_not_rows_are_recomputed_and_overwritten(cache_url, caplog):
    cache, model = cache_on(cache_url), CountingModel()
    texts = ["one", "two", "three"]
    first, _ = through(cache, model, texts)
    client = redis.Redis.from_url(cache_url)
    keys = sorted(client.scan_iter(f"{CACHE_KEY_PREFIX}*"))
    client.set(keys[0], b"garbage")
    client.set(keys[1], client.get(keys[1])[:-4])  # truncated
    entry = bytearray(client.get(keys[2]))
    entry[-1] ^= 0xFF
    client.set(keys[2], bytes(entry))  # right length, wrong bytes
    model.computed.clear()
    with caplog.at_level(logging.WARNING):
        again, from_cache = through(cache, model, texts)
    assert from_cache == [False] * 3 and sorted(model.computed) == sorted(texts)
    assert again.tobytes() == first.tobytes() and "not well-formed rows" in caplog.text
    assert cache.store.take_tally()["errors"] == 3
    model.computed.clear()
    assert through(cache, model, texts)[1] == [True] * 3 and model.computed == []
    client.set(keys[0], b"garbage again")
    with caplog.at_level(logging.WARNING):
        assert sum(through(cache, model, texts)[1]) == 2 and len(model.computed) == 1
    assert caplog.text.count("not well-formed rows") == 1, "a second warning within the minute"


def test_sparse_rows_are_cached_apart_from_dense_ones(cache_url):
    cache, model = cache_on(cache_url), CountingModel(dim=64)  # dim: the sparse model's vocabulary
    through(cache, model, ["sparse text"])
    rows, from_cache = through(cache, model, ["sparse text"], output=SPARSE)
    assert from_cache == [False]
    again, from_cache = through(cache, model, ["sparse text"], output=SPARSE)
    assert from_cache == [True]
    assert again[0].indices.tolist() == rows[0].indices.tolist() == [1, 11]
    assert again[0].values.tobytes() == rows[0].values.tobytes()


def test_a_dead_cache_costs_speed_only_and_is_left_alone_a_while(caplog):
    cache, model = cache_on(f"redis://127.0.0.1:{free_port()}/0"), CountingModel()
    with caplog.at_level(logging.WARNING):
        rows, from_cache = through(cache, model, ["a", "b"])
        through(cache, model, ["a", "b"])
    assert from_cache == [False, False] and model.computed == ["a", "b", "a", "b"]
    assert rows.tobytes() == np.stack([model.row("a"), model.row("b")]).tobytes()
    # One read failed; the write after it and the second call did not try (resting), one warning in all.
    assert cache.store.take_tally()["errors"] == 1
    assert caplog.text.count("embedding cache: read failed") == 1


def test_a_full_cache_that_refuses_writes_costs_speed_only(tmp_path):
    server = start_redis(tmp_path / "full", extra_args=("--maxmemory", "1mb", "--maxmemory-policy", "noeviction"))
    try:
        client = redis.Redis(port=server.port)
        with pytest.raises(redis.exceptions.OutOfMemoryError):  # over maxmemory (with the filler, if it fit)
            client.set("filler", b"x" * 2_000_000)
            client.set("filler-2", b"x" * 2_000_000)
        cache, model = cache_on(server.url(0)), CountingModel()
        rows, from_cache = through(cache, model, ["a", "b"])
        assert from_cache == [False, False] and rows.tobytes() == np.stack([model.row("a"), model.row("b")]).tobytes()
        assert cache.store.take_tally()["errors"] == 1 and list(client.scan_iter(f"{CACHE_KEY_PREFIX}*")) == []
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)


def test_the_space_is_the_models_and_differs_by_normalization(cache_url):
    cache, model = cache_on(cache_url), CountingModel()
    unit, raw = cache.space(model, DENSE, True), cache.space(model, DENSE, False)
    assert isinstance(unit, VectorSpace) and unit.model == "weights" and unit.runtime == "numpy"
    assert unit.key("x") != raw.key("x") and unit is cache.space(model, DENSE, True)

"""The cache's own Redis (INFERENCE_CACHE_URL), as a worker child talks to it: one round trip to read a
batch's entries, one pipelined to write its misses, and nothing worse than a miss when it fails.

A cache that is down, slow (past INFERENCE_CACHE_TIMEOUT_MS) or full (maxmemory with noeviction
refusing writes) costs speed only: the texts are computed, the error counted, one warning a minute
at most per process, and after a failure the cache is left alone for RETRY_AFTER_S, so a dead cache
does not add a connect timeout to every task. Its client is made in the process that uses it, never
inherited across a fork.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 5.0
WARN_EVERY_S = 60.0


@dataclass
class CacheTally:
    """What this process's cache did since the last time it was taken (the slot table sums it)."""

    hits: int = 0
    misses: int = 0
    errors: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass
class CacheStore:
    """Reads and writes entries on the cache's Redis, surviving its faults; `url` is kept out of repr."""

    settings: Settings = field(repr=False)
    tally: CacheTally = field(default_factory=CacheTally)
    _client: Any = field(default=None, repr=False)
    _client_pid: int = 0
    _resting_until: float = 0.0
    # When this process last warned, by kind of warning (a flood of bad entries must not hide a dead cache).
    _last_warning: dict[str, float] = field(default_factory=dict)

    @property
    def ttl_s(self) -> int:
        return self.settings.cache_ttl_s

    def client(self) -> redis.Redis:
        """This process's client (a new one after a fork), every command bounded by the cache timeout."""
        if self._client is None or self._client_pid != os.getpid():
            from inference_tasks.redis_access.connections import cache_redis

            self._client, self._client_pid = cache_redis(self.settings), os.getpid()
        return self._client

    def read(self, keys: Sequence[str]) -> list[bytes | None]:
        """Each key's entry (None: absent, or the cache unusable right now), in one round trip."""
        if not keys or self._resting():
            return [None] * len(keys)
        try:
            found: list[Any] = self.client().mget(list(keys))
        except Exception as error:  # noqa: BLE001 - any cache failure costs a miss, never the task
            self._failed("read", error)
            return [None] * len(keys)
        self.tally.bytes_read += sum(len(entry) for entry in found if entry)
        return list(found)

    def write(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """Store entries with the TTL, pipelined in one round trip (a failure is counted, never raised)."""
        if not entries or self._resting():
            return
        try:
            with self.client().pipeline(transaction=False) as pipe:
                for key, entry in entries:
                    pipe.set(key, entry, ex=self.ttl_s)
                pipe.execute()
        except Exception as error:  # noqa: BLE001 - a full or absent cache costs speed only
            self._failed("write", error)
            return
        self.tally.bytes_written += sum(len(entry) for _, entry in entries)

    def take_tally(self) -> dict[str, int]:
        """The counts since the last call (the slot table adds them up for the exporter), reset."""
        counts = {name: int(value) for name, value in vars(self.tally).items()}
        self.tally = CacheTally()
        return counts

    def _resting(self) -> bool:
        return time.monotonic() < self._resting_until

    def warn(self, kind: str, message: str) -> None:
        """Log `message` unless this process gave a warning of this `kind` less than a minute ago (a dead
        cache or a flood of bad entries must not flood the log; the error counter counts every one)."""
        now = time.monotonic()
        if now - self._last_warning.get(kind, float("-inf")) >= WARN_EVERY_S:
            self._last_warning[kind] = now
            logger.warning("embedding cache: %s (this warning at most once a minute)", message)

    def _failed(self, what: str, error: Exception) -> None:
        self.tally.errors += 1
        self._resting_until = time.monotonic() + RETRY_AFTER_S
        # A connection broken mid-command must not be reused as if it were healthy.
        if self._client is not None:
            self._client.connection_pool.disconnect()
        retry = f"texts are computed, the cache is tried again in {RETRY_AFTER_S:.0f} s"
        self.warn(what, f"{what} failed ({type(error).__name__}: {error}); {retry}")

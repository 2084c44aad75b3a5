"""Await task results without a thread or a poll: one pub/sub connection per gateway process carries every
waiting request's subscription.

Celery's Redis result backend (ours included) PUBLISHes each stored state on `celery-task-meta-<id>`,
the result's own key. A wait subscribes to that channel first and then reads the key once, so a result
stored before the subscription is found by the read and one stored after it arrives as a message; the
reader task hands each final state to its waiter. A finished result is deleted by the read that returns
it (lua/read_finished_result.lua), or right after its message, so the gateway leaves nothing in Redis. When the
pub/sub connection fails (a restart, a failover), the reader connects again, subscribes every waiting
channel again and reads each key once more: a result published in the gap is read instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from inference_tasks.gateway.wire import FINAL_STATES
from inference_tasks.lua import script
from inference_tasks.redis_access.keys import RESULT_KEY_PREFIX

log = logging.getLogger(__name__)
# After a failed pub/sub connection, the pause before connecting again.
RECONNECT_PAUSE_S = 0.2


class ResultWaiter:
    """Waits for many tasks' results on one pub/sub connection of `client` (the results' Redis)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._read_finished = client.register_script(script("read_finished_result"))
        self._pubsub: Any = None
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        # Held while the shared pub/sub connection is made: two first subscriptions at once would each
        # make one (redis-py connects lazily), and one of them would be lost.
        self._connecting = asyncio.Lock()

    async def wait(self, task_id: str, timeout: float) -> dict[str, Any]:
        """The task's final stored state ({"status", "result", ...}), deleted from Redis once read;
        TimeoutError past `timeout` seconds (the result, if it comes later, expires with its lifetime)."""
        channel = RESULT_KEY_PREFIX + task_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[channel] = future
        try:
            async with asyncio.timeout(timeout):
                await self._subscribe(channel)
                stored = await self.read(task_id)
                if stored is not None:
                    return stored
                return await future
        finally:
            self._waiting.pop(channel, None)
            with contextlib.suppress(RedisError, OSError, RuntimeError):
                if self._pubsub is not None:
                    await self._pubsub.unsubscribe(channel)

    async def read(self, task_id: str) -> dict[str, Any] | None:
        """The stored state if final (and then deleted), else None."""
        raw = await self._read_finished(keys=[RESULT_KEY_PREFIX + task_id])
        if raw is None:
            return None
        meta: dict[str, Any] = orjson.loads(raw)
        return meta if meta.get("status") in FINAL_STATES else None

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.aclose()

    async def _subscribe(self, channel: str) -> None:
        if self._pubsub is None:
            self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        if self._pubsub.connection is None:
            async with self._connecting:
                await self._pubsub.connect()
        await self._pubsub.subscribe(channel)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_messages(), name="gateway-result-reader")

    async def _read_messages(self) -> None:
        while True:
            if self._pubsub.connection is None:  # made anew with nobody waiting: the next wait connects it
                await asyncio.sleep(RECONNECT_PAUSE_S)
                continue
            try:
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except (RedisError, OSError) as error:
                log.warning("result subscription lost (%s: %s); subscribing again", type(error).__name__, error)
                await self._resubscribe()
                continue
            if message is not None and message.get("type") == "message":
                await self._deliver(message["channel"], message["data"])

    async def _deliver(self, channel: bytes | str, data: bytes) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        future = self._waiting.get(name)
        if future is None or future.done():
            return
        meta = orjson.loads(data)
        if meta.get("status") not in FINAL_STATES:
            return
        future.set_result(meta)
        with contextlib.suppress(RedisError, OSError):
            await self._client.delete(name)

    async def _resubscribe(self) -> None:
        """A new pub/sub connection with every waiting channel, then one read of each key."""
        old, self._pubsub = self._pubsub, self._client.pubsub(ignore_subscribe_messages=True)
        with contextlib.suppress(RedisError, OSError):
            await old.aclose()
        while True:
            try:
                channels = list(self._waiting)
                if channels:
                    await self._pubsub.subscribe(*channels)
                for channel in channels:
                    stored = await self.read(channel.removeprefix(RESULT_KEY_PREFIX))
                    future = self._waiting.get(channel)
                    if stored is not None and future is not None and not future.done():
                        future.set_result(stored)
                return
            except (RedisError, OSError):
                await asyncio.sleep(RECONNECT_PAUSE_S)

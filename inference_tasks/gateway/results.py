"""Await task results without a thread or a poll: one pub/sub connection per gateway process carries every
waiting request's subscription.

Celery's Redis result backend (ours included) PUBLISHes each stored state on `celery-task-meta-<id>`,
the result's own key. A wait subscribes to that channel and only pushes its task once Redis has confirmed
the subscription, so the result cannot be published unseen and no read of the key is needed; the reader
task hands each final state to its waiter. Subscriptions, unsubscriptions and the deletion of results
delivered (UNLINK: the gateway leaves nothing in Redis) are sent in batches, one command each per turn of
the event loop for every request that needs one, which is most of what keeps the gateway's own CPU low
(benchmarks/gateway.py). When the pub/sub connection fails (a restart, a failover), the reader connects
again, subscribes every waiting channel again and reads each key once (lua/read_finished_result.lua):
a result published in the gap is read instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
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
# How long close() waits for the reader and the batches to stop.
CLOSE_WAIT_S = 2.0


class ResultWaiter:
    """Waits for many tasks' results on one pub/sub connection of `client` (the results' Redis)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._read_finished = client.register_script(script("read_finished_result"))
        self._pubsub: Any = client.pubsub()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._confirming: dict[str, asyncio.Future[None]] = {}
        self._batches: dict[str, set[str]] = {"subscribe": set(), "unsubscribe": set(), "unlink": set()}
        self._work = asyncio.Event()
        # Set once the pub/sub connection exists (its first SUBSCRIBE makes it); the reader waits for it.
        self._connected = asyncio.Event()
        # Held around every command on the pub/sub connection: redis-py connects it lazily, and two
        # commands racing there would each make one.
        self._commands = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    async def wait(self, task_id: str, timeout: float, push: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        """Subscribe to the task's result, then `push()` the task, then its final stored state ({"status",
        "result", ...}), deleted from Redis once read; TimeoutError past `timeout` seconds (a result that
        comes later expires with its lifetime). What `push()` raises is raised, and nothing waits on."""
        self._start()
        channel = RESULT_KEY_PREFIX + task_id
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        confirmed: asyncio.Future[None] = loop.create_future()
        self._waiting[channel], self._confirming[channel] = future, confirmed
        self._batch("subscribe", channel)
        try:
            async with asyncio.timeout(timeout):
                await confirmed
                await push()
                return await future
        finally:
            self._waiting.pop(channel, None)
            self._confirming.pop(channel, None)
            self._batch("unsubscribe", channel)

    async def read(self, task_id: str) -> dict[str, Any] | None:
        """The stored state if final (and then deleted), else None."""
        raw = await self._read_finished(keys=[RESULT_KEY_PREFIX + task_id])
        if raw is None:
            return None
        meta: dict[str, Any] = orjson.loads(raw)
        return meta if meta.get("status") in FINAL_STATES else None

    async def close(self) -> None:
        """Stop the reader and the batches. redis-py's get_message can absorb a cancellation (it returns
        None instead), so the reader also stops on `_closing`, and close waits for it a bounded time."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CLOSE_WAIT_S)
        with contextlib.suppress(RedisError, OSError):
            await self._pubsub.aclose()

    def _start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._read_messages(), name="gateway-result-reader"),
                           asyncio.create_task(self._send_batches(), name="gateway-result-batches")]  # fmt: skip

    def _batch(self, command: str, name: str) -> None:
        self._batches[command].add(name)
        self._work.set()

    async def _send_batches(self) -> None:
        """SUBSCRIBE, UNSUBSCRIBE and UNLINK for everything batched since the last turn, one command each."""
        while True:
            await self._work.wait()
            self._work.clear()
            batches = {command: set(names) for command, names in self._batches.items()}
            for names in self._batches.values():
                names.clear()
            batches["subscribe"] = {name for name in batches["subscribe"] if name in self._confirming}
            try:
                async with self._commands:
                    if batches["subscribe"]:
                        await self._pubsub.subscribe(*batches["subscribe"])
                        self._connected.set()
                    if batches["unsubscribe"]:
                        await self._pubsub.unsubscribe(*batches["unsubscribe"])
                if batches["unlink"]:
                    await self._client.unlink(*batches["unlink"])
            except (RedisError, OSError) as error:
                log.warning("result subscription commands failed (%s: %s); again shortly", type(error).__name__, error)
                for command, names in batches.items():  # sent again after a pause
                    self._batches[command].update(names)
                await asyncio.sleep(RECONNECT_PAUSE_S)
                self._work.set()

    async def _read_messages(self) -> None:
        while not self._closing:
            await self._connected.wait()
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except (RedisError, OSError) as error:
                log.warning("result subscription lost (%s: %s); subscribing again", type(error).__name__, error)
                await self._resubscribe()
                continue
            if message is not None:
                self._handle(message)

    def _handle(self, message: dict[str, Any]) -> None:
        channel = message["channel"]
        name = channel.decode() if isinstance(channel, bytes) else channel
        if message["type"] == "subscribe":
            confirmed = self._confirming.get(name)
            if confirmed is not None and not confirmed.done():
                confirmed.set_result(None)
            return
        future = self._waiting.get(name)
        if message["type"] != "message" or future is None or future.done():
            return
        meta = orjson.loads(message["data"])
        if meta.get("status") in FINAL_STATES:
            future.set_result(meta)
            self._batch("unlink", name)

    async def _resubscribe(self) -> None:
        """A new pub/sub connection with every waiting channel, then one read of each key."""
        while True:
            try:
                async with self._commands:
                    old, self._pubsub = self._pubsub, self._client.pubsub()
                    with contextlib.suppress(RedisError, OSError):
                        await old.aclose()
                    channels = list(self._confirming)
                    if channels:
                        await self._pubsub.subscribe(*channels)
                        self._connected.set()
                    else:  # nothing to wait on: the next SUBSCRIBE connects it
                        self._connected.clear()
                for channel in channels:
                    stored = await self.read(channel.removeprefix(RESULT_KEY_PREFIX))
                    future = self._waiting.get(channel)
                    if stored is not None and future is not None and not future.done():
                        future.set_result(stored)
                return
            except (RedisError, OSError):
                await asyncio.sleep(RECONNECT_PAUSE_S)

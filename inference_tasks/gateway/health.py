"""Which served models have a worker: `GET /health` (ready when the required ones do) and each request's check.

The exec probe (`inference-tasks probe`) reads worker state files on the worker's own host; a gateway runs
elsewhere, so it asks the fleet instead: one broadcast (Celery's `active_queues`, 1 s) answered by every
worker with the queues it consumes, and a model is served when a worker consumes `inference.<alias>`.
The broadcast runs in a thread, one at a time, and its answer is kept for INFERENCE_GATEWAY_HEALTH_TTL_S,
so probes cost the fleet one broadcast per interval however many there are. A request never waits for a
broadcast while its model had a worker at the last answer (a stale answer is renewed in the background);
only a model with none is asked about again, once per RECHECK_S, so a worker that just started is found
and a model with none is refused within about a second and a half."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from inference_tasks.config.catalogue import model_queue

# Seconds the broadcast waits for workers' replies.
BROADCAST_TIMEOUT_S = 1.0
# An answer that says a model has no worker is trusted for this long; after it, a request asks again.
RECHECK_S = 1.0


class FleetHealth:
    """Which of `aliases` have a worker, asked of the fleet through `app`; ready when each of `required` has one."""

    def __init__(self, app: Any, aliases: tuple[str, ...], required: tuple[str, ...], ttl_s: float) -> None:
        self._app, self._aliases, self._required, self._ttl_s = app, aliases, required, ttl_s
        self._lock = asyncio.Lock()
        self._answer: tuple[float, dict[str, Any]] | None = None
        self._renewal: asyncio.Task[Any] | None = None

    async def report(self) -> dict[str, Any]:
        """{"status": "ready" | "unavailable", "models": {alias: [worker nodes]}, "required": [aliases],
        "missing": [required aliases with no worker], "unserved": [aliases with no worker]}, at most ttl_s old."""
        return await self._fresh(self._ttl_s)

    async def workers(self, alias: str) -> list[str]:
        """The nodes consuming `alias`'s queue: from the last answer while it names some (renewed in the
        background once stale), else from an answer at most RECHECK_S old."""
        if self._answer is not None:
            taken, answer = self._answer
            nodes = answer["models"].get(alias) or []
            if nodes:
                if time.monotonic() - taken >= self._ttl_s and (self._renewal is None or self._renewal.done()):
                    self._renewal = asyncio.create_task(self._fresh(self._ttl_s))
                return list(nodes)
        return list((await self._fresh(min(RECHECK_S, self._ttl_s)))["models"].get(alias) or [])

    async def _fresh(self, max_age_s: float) -> dict[str, Any]:
        async with self._lock:
            if self._answer is None or time.monotonic() - self._answer[0] >= max_age_s:
                self._answer = (time.monotonic(), await asyncio.to_thread(self._ask))
            return self._answer[1]

    def _ask(self) -> dict[str, Any]:
        try:
            replies = self._app.control.inspect(timeout=BROADCAST_TIMEOUT_S).active_queues() or {}
        except Exception as error:  # noqa: BLE001 - a broker that cannot be asked is the finding
            return {"status": "unavailable", "models": {}, "required": list(self._required),
                    "missing": list(self._required), "unserved": list(self._aliases),
                    "error": f"{type(error).__name__}: {error}"}  # fmt: skip
        served = served_models(replies, self._aliases)
        missing = [alias for alias in self._required if not served[alias]]
        return {"status": "unavailable" if missing else "ready", "models": served, "required": list(self._required),
                "missing": missing, "unserved": [alias for alias in self._aliases if not served[alias]]}  # fmt: skip


def served_models(replies: dict[str, Any], aliases: tuple[str, ...]) -> dict[str, list[str]]:
    """For each alias, the nodes whose active queues include its queue."""
    served: dict[str, list[str]] = {alias: [] for alias in aliases}
    for node, queues in replies.items():
        names = {queue.get("name") for queue in queues or [] if isinstance(queue, dict)}
        for alias in aliases:
            if model_queue(alias) in names:
                served[alias].append(node)
    return {alias: sorted(nodes) for alias, nodes in served.items()}

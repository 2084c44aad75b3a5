"""`GET /health`: ready when every served model has a worker that answers.

The exec probe (`inference-tasks probe`) reads worker state files on the worker's own host; a gateway runs
elsewhere, so it asks the fleet instead: one broadcast (Celery's `active_queues`, 1 s) answered by every
worker with the queues it consumes, and a model is served when a worker consumes `inference.<alias>`.
The broadcast runs in a thread, one at a time, and its answer is kept for INFERENCE_GATEWAY_HEALTH_TTL_S,
so probes cost the fleet one broadcast per interval however many there are."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from inference_tasks.config.catalogue import model_queue

# Seconds the broadcast waits for workers' replies.
BROADCAST_TIMEOUT_S = 1.0


class FleetHealth:
    """Which of `aliases` have a worker, asked of the fleet through `app` at most once per `ttl_s`."""

    def __init__(self, app: Any, aliases: tuple[str, ...], ttl_s: float) -> None:
        self._app, self._aliases, self._ttl_s = app, aliases, ttl_s
        self._lock = asyncio.Lock()
        self._answer: tuple[float, dict[str, Any]] | None = None

    async def report(self) -> dict[str, Any]:
        """{"status": "ready" | "unavailable", "models": {alias: [worker nodes]}, "missing": [aliases]}."""
        async with self._lock:
            if self._answer is None or time.monotonic() - self._answer[0] >= self._ttl_s:
                self._answer = (time.monotonic(), await asyncio.to_thread(self._ask))
            return self._answer[1]

    def _ask(self) -> dict[str, Any]:
        try:
            replies = self._app.control.inspect(timeout=BROADCAST_TIMEOUT_S).active_queues() or {}
        except Exception as error:  # noqa: BLE001 - a broker that cannot be asked is the finding
            return {"status": "unavailable", "models": {}, "missing": list(self._aliases),
                    "error": f"{type(error).__name__}: {error}"}  # fmt: skip
        served = served_models(replies, self._aliases)
        missing = [alias for alias in self._aliases if not served[alias]]
        return {"status": "unavailable" if missing else "ready", "models": served, "missing": missing}


def served_models(replies: dict[str, Any], aliases: tuple[str, ...]) -> dict[str, list[str]]:
    """For each alias, the nodes whose active queues include its queue."""
    served: dict[str, list[str]] = {alias: [] for alias in aliases}
    for node, queues in replies.items():
        names = {queue.get("name") for queue in queues or [] if isinstance(queue, dict)}
        for alias in aliases:
            if model_queue(alias) in names:
                served[alias].append(node)
    return {alias: sorted(nodes) for alias, nodes in served.items()}

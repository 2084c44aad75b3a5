"""`inference-tasks status`: queues and depths, workers online, recent failures, on one screen."""

from __future__ import annotations

import datetime
from typing import Any

from inference_tasks import queue_state, store


def show_status(app: Any, console: Any, timeout: float = 1.0, failures: int = 10) -> int:
    """Print the three tables; exit code 1 when Redis cannot be read, else 0."""
    from rich.table import Table

    client = store.broker_redis(app.settings)
    try:
        depths = queue_state.queue_depths(client)
        unacked = queue_state.unacked_count(client)
        dead = queue_state.dead_letter_count(client)
        recent = queue_state.recent_failures(client, failures)
    except Exception as error:  # noqa: BLE001 - unreachable for whatever reason is the finding
        console.print(f"[red]Redis unreachable[/red] at {app.settings.redacted_redis_url}: {error}")
        return 1
    queues = Table(title=f"queues at {app.settings.redacted_redis_url}")
    for column in ("queue", "waiting", "by priority (0 first)"):
        queues.add_column(column)
    for queue in dict.fromkeys(entry.queue for entry in depths):
        mine = [entry for entry in depths if entry.queue == queue]
        by_priority = ", ".join(f"{entry.priority}: {entry.depth}" for entry in mine if entry.depth) or "-"
        queues.add_row(queue, str(sum(entry.depth for entry in mine)), by_priority)
    console.print(queues)
    console.print(f"unacknowledged (running or prefetched): {unacked}   dead-lettered: {dead}")

    replies = app.control.ping(timeout=timeout) or []
    workers = Table(title=f"workers online: {len(replies)}")
    workers.add_column("worker")
    workers.add_column("reply")
    for reply in replies:
        for node, answer in reply.items():
            workers.add_row(node, str(answer.get("ok", answer)))
    console.print(workers)

    failed = Table(title=f"recent failures (newest first, last {failures})")
    for column in ("when (UTC)", "task", "id", "worker", "error"):
        failed.add_column(column)
    for failure in recent:
        when = datetime.datetime.fromtimestamp(failure["at"], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        failed.add_row(when, failure["task"], failure["id"], failure["hostname"], failure["error"])
    console.print(failed)
    return 0

"""`inference-tasks status`: queues and depths, workers online, recent failures, on one screen."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from inference_tasks.ops.cache_report import show_cache
from inference_tasks.redis_access import queue_state
from inference_tasks.redis_access.connections import broker_redis, result_redis

if TYPE_CHECKING:
    from inference_tasks.config import Settings


def show_status(app: Any, console: Any, timeout: float = 1.0, failures: int = 10) -> int:
    """Print the three tables; exit code 1 when Redis (the broker's, or results' own) cannot be read, else 0."""
    from rich.table import Table

    client = broker_redis(app.settings)
    try:
        queues = queue_state.snapshot(client, failures, queue_state.fleet_queues(app.settings))
    except Exception as error:  # noqa: BLE001 - unreachable for whatever reason is the finding
        console.print(f"[red]Redis unreachable[/red] at {app.settings.redacted_redis_url}: {error}")
        return 1
    table = Table(title=f"queues at {app.settings.redacted_redis_url}")
    for column in ("queue", "waiting", "by priority (0 first)"):
        table.add_column(column)
    for queue in dict.fromkeys(entry.queue for entry in queues.depths):
        mine = [entry for entry in queues.depths if entry.queue == queue]
        by_priority = ", ".join(f"{entry.priority}: {entry.depth}" for entry in mine if entry.depth) or "-"
        table.add_row(queue, str(sum(entry.depth for entry in mine)), by_priority)
    console.print(table)
    console.print(f"unacknowledged (running or prefetched): {queues.unacked}   dead-lettered: {queues.dead_letters}")
    if app.settings.results_apart and not show_result_redis(app.settings, console):
        return 1
    if app.settings.cache_url:
        show_cache(app.settings, console)

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
    for failure in queues.recent_failures:
        when = datetime.datetime.fromtimestamp(failure["at"], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        failed.add_row(when, failure["task"], failure["id"], failure["hostname"], failure["error"])
    console.print(failed)
    return 0


def show_result_redis(settings: Settings, console: Any) -> bool:
    """One line on results' own Redis (INFERENCE_RESULT_REDIS_URL): its memory; False if unreachable."""
    try:
        memory = queue_state.redis_memory(result_redis(settings))
    except Exception as error:  # noqa: BLE001 - unreachable for whatever reason is the finding
        console.print(f"[red]result Redis unreachable[/red] at {settings.redacted_results_url}: {error}")
        return False
    limit = f"{memory.max_bytes / 2**20:.1f} MiB" if memory.max_bytes else "no maxmemory"
    console.print(
        f"results at {settings.redacted_results_url}: {memory.used_bytes / 2**20:.1f} MiB used ({limit}, "
        f"{memory.policy or '?'})"
    )
    return True

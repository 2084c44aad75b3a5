"""What `doctor` and `status` say about the embedding cache's Redis (INFERENCE_CACHE_URL): reachable, the
memory it uses, and whether it evicts. A cache must: without maxmemory and an eviction policy it grows
until Redis refuses writes, and from then on every text is computed (docs/cache.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inference_tasks.config.checks import redact
from inference_tasks.config.defaults import ENV_PREFIX

if TYPE_CHECKING:
    from inference_tasks.config import Settings

LABEL = "cache redis"
FIX_EVICTION = "maxmemory <bytes> and maxmemory-policy allkeys-lru on the cache's own Redis"


Finding = tuple[str, bool, str, str]


def cache_findings(ping_ok: bool, error: str, info: dict[str, Any], config: dict[str, str] | None) -> list[Finding]:
    """(name, ok, detail, fix) lines for doctor, from what was read of the cache's Redis."""
    if not ping_ok:
        detail = f"unreachable: {error} (workers compute every text)"
        return [(LABEL, False, detail, f"start it or fix {ENV_PREFIX}CACHE_URL")]
    used = int(info.get("used_memory", 0))
    found = [(LABEL, True, f"reachable, version {info.get('redis_version', '?')}, {used / 2**20:.1f} MiB used", "")]
    if config is None:
        found.append((f"{LABEL} eviction", True, "CONFIG is disabled here; check maxmemory-policy yourself", ""))
        return found
    policy, limit = config.get("maxmemory-policy", "?"), int(config.get("maxmemory", "0") or 0)
    evicts = policy != "noeviction" and limit > 0
    detail = f"maxmemory-policy {policy}, maxmemory {limit}"
    if not evicts:
        detail += ": no eviction policy, the cache grows until Redis refuses writes"
    found.append((f"{LABEL} eviction", evicts, detail, "" if evicts else FIX_EVICTION))
    return found


def show_cache(settings: Settings, console: Any) -> None:
    """status's line on the cache's Redis: its memory and eviction policy, or that it is unreachable
    (a cache down costs speed only: status still succeeds)."""
    from inference_tasks.redis_access import queue_state
    from inference_tasks.redis_access.connections import cache_redis

    where = redact(str(settings.cache_url))
    client = cache_redis(settings)
    try:
        memory = queue_state.redis_memory(client)
        entries = int(client.dbsize())
    except Exception as error:  # noqa: BLE001 - unreachable for whatever reason is the finding
        console.print(f"[yellow]cache Redis unreachable[/yellow] at {where}: {error} (workers compute every text)")
        return
    finally:
        client.close()
    limit = f"{memory.max_bytes / 2**20:.1f} MiB" if memory.max_bytes else "no maxmemory"
    console.print(
        f"embedding cache at {where}: {entries} keys, {memory.used_bytes / 2**20:.1f} MiB used ({limit}, "
        f"{memory.policy or '?'})"
    )

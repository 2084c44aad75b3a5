"""`inference-tasks usage`: the gateway's usage per tenant and model, summed across every gateway replica from
the hourly hashes they count into (gateway/limits.py): requests, texts, tokens, cached texts, refusals by reason."""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from typing import Any

from inference_tasks.redis_access.keys import USAGE_HOUR_FORMAT, USAGE_TTL_S, usage_key

COLUMNS = ("requests", "texts", "tokens", "cached")
SINCE = re.compile(r"^(\d+)([hd])$")
HOUR_S = 3600


def since_hours(since: str, now: float | None = None) -> list[str]:
    """The UTC hours (USAGE_HOUR_FORMAT) from `since` ("24h", "7d") to now, oldest first; ValueError naming
    what is allowed."""
    found = SINCE.match(since.strip())
    if not found or int(found[1]) < 1:
        raise ValueError(f"--since {since!r}: give hours or days, as 24h or 7d")
    span_s = int(found[1]) * (HOUR_S if found[2] == "h" else 24 * HOUR_S)
    if span_s > USAGE_TTL_S:
        raise ValueError(f"--since {since!r}: usage is kept {USAGE_TTL_S // 86400} days")
    now = time.time() if now is None else now
    first = int((now - span_s) // HOUR_S) + 1
    return [
        time.strftime(USAGE_HOUR_FORMAT, time.gmtime(hour * HOUR_S)) for hour in range(first, int(now // HOUR_S) + 1)
    ]


def read_usage(redis: Any, hours: list[str]) -> dict[tuple[str, str], dict[str, int]]:
    """{(tenant, model): {what: count}} summed over `hours`, in one pipeline."""
    pipe = redis.pipeline(transaction=False)
    for hour in hours:
        pipe.hgetall(usage_key(hour))
    summed: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for counts in pipe.execute():
        for field, value in counts.items():
            tenant, model, what = (field.decode() if isinstance(field, bytes) else field).split("|", 2)
            summed[(tenant, model)][what] += int(value)
    return {key: dict(counts) for key, counts in sorted(summed.items())}


def usage_table(usage: dict[tuple[str, str], dict[str, int]]) -> list[list[str]]:
    """Rows for a table: tenant, model, the COLUMNS, then refusals as "reason=count" joined."""
    rows = []
    for (tenant, model), counts in usage.items():
        refusals = sorted(
            (what.removeprefix("refused_"), n) for what, n in counts.items() if what.startswith("refused_")
        )
        rows.append([tenant, model, *(str(counts.get(column, 0)) for column in COLUMNS),
                     ", ".join(f"{reason}={n}" for reason, n in refusals) or "-"])  # fmt: skip
    return rows


def show_usage(settings: Any, since: str, as_json: bool, console: Any) -> None:
    """Print the usage of the last `since` as a table (or JSON); ValueError for a bad `since`."""
    from rich.table import Table

    from inference_tasks.redis_access.connections import broker_redis

    hours = since_hours(since)
    found = read_usage(broker_redis(settings), hours)
    if as_json:
        print(json.dumps([{"tenant": tenant, "model": model, **counts} for (tenant, model), counts in found.items()]))
        return
    table = Table("tenant", "model", *COLUMNS, "refused", title=f"gateway usage, UTC hours {hours[0]}-{hours[-1]}")
    for row in usage_table(found):
        table.add_row(*row)
    console.print(table)

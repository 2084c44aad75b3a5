"""What scripts print and write: the serving table, ratios against references, the CPU, the JSON report."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

TABLE_COLUMNS = (
    ("config", "{:<22}"),
    ("producers", "{:>4}"),
    ("requests_per_s", "{:>7.2f}"),
    ("sentences_per_s", "{:>7.1f}"),
    ("latency_mean_s", "{:>7.2f}"),
    ("latency_p50_s", "{:>7.2f}"),
    ("latency_p95_s", "{:>7.2f}"),
    ("peak_os_threads", "{:>6}"),
    ("cpu_s", "{:>7.1f}"),
    ("peak_rss_mib", "{:>7.0f}"),
    ("vs_http_default", "{:>6.2f}"),
    ("vs_ceiling", "{:>6.2f}"),
)
HEADER = "config                  prod   req/s  sent/s  mean s   p50 s   p95 s threads   cpu s RSS MiB  /http /ceil"


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}\n{HEADER}")
    for row in rows:
        cells = []
        for key, fmt in TABLE_COLUMNS:
            value = row.get(key)
            cells.append(fmt.format(value) if value is not None else " " * len(fmt.format(0)))
        print(" ".join(cells) + ("  ERRORS: " + str(row["errors"]) if row["errors"] else ""))


def add_ratios(rows: list[dict]) -> None:
    """Throughput ratios against http-default and ceiling measured at the same producer count."""
    by_level: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_level.setdefault(row["producers"], {})[row["config"]] = row
    for row in rows:
        level = by_level[row["producers"]]
        for reference, key in (("http-default", "vs_http_default"), ("ceiling", "vs_ceiling")):
            if reference in level:
                row[key] = row["requests_per_s"] / level[reference]["requests_per_s"]


def cpu_name() -> str:
    """The CPU's model name, printed with every speed figure (hosts differ between runs)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def write_report(out: Path, script: str, report: dict[str, Any]) -> None:
    """`report` as JSON at `out`, with the command that made it and the CPU it ran on."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join([f"python -m benchmarks.{script}", *sys.argv[1:]])
    out.write_text(json.dumps({"command": command, "cpu": cpu_name(), **report}, indent=2) + "\n")
    print(f"results: {out}")

"""Where things run on this host: CPU sets for servers and harness, and a clean stop on TERM."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any


def parse_cpus(text: str) -> frozenset[int]:
    """'1' or '2,3' or '2-3' as a CPU set; '' as none."""
    cpus: set[int] = set()
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def on_cpus(cpus: frozenset[int], start: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `start` (which launches processes) with this thread confined to `cpus`, so what it forks or
    spawns inherits them; then give the thread its CPUs back. No CPUs: just `start`."""
    if not cpus:
        return start(*args, **kwargs)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return start(*args, **kwargs)
    finally:
        os.sched_setaffinity(0, saved)


def stop_cleanly_on_term() -> None:
    """SIGTERM (timeout, kill) unwinds like Ctrl-C, so the finally blocks stop every server started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

"""What screening costs the worker's main process per message, next to the bare parse it cannot avoid.

Every message a worker pops is screened (broker/envelope.py) before Celery sees it: the protocol
checks, and the bounds of broker/limits.py measured on the raw bytes (json_shape.py). For a one-text
task, a 64-text task and the worst messages a hostile producer can send within the 8 MiB limit, this
prints the time of `screen()` and, measured alternately in the same run, of the two json.loads
calls (envelope, then body) that any screening must make.

    .venv/bin/python -m benchmarks.screening
"""

from __future__ import annotations

import base64
import json
import platform
import time
from collections.abc import Callable

from inference_tasks.broker.envelope import screen
from inference_tasks.broker.limits import limits_from_settings
from inference_tasks.config import Settings
from inference_tasks.routing import EMBED_TASK
from tests.support.wire import encode, task_message

TEXT = "Support ticket: the export to PDF fails after the last update."


def bare_parse(raw: bytes) -> None:
    envelope = json.loads(raw)
    json.loads(base64.b64decode(envelope["body"]))


def per_call_us(function: Callable[[], object], seconds: float = 0.5) -> float:
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        function()
        calls += 1
    return elapsed / calls * 1e6


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    bounds = limits_from_settings(Settings())
    messages = {
        "1 text": encode(task_message(EMBED_TASK, [[TEXT]])),
        "64 texts": encode(task_message(EMBED_TASK, [[f"{TEXT} ({i})" for i in range(64)]])),
        "8 MB of [] (refused: items)": b'{"a": [' + b"[]," * 2_700_000 + b"[]]}",
        "8 MB deep (refused: items)": b'{"a": ' + b"[" * 4_000_000 + b"]" * 4_000_000 + b"}",
    }
    print(f"CPU: {cpu_name()}")
    print(f"{'message':<30} {'bytes':>10} {'screen() us':>12} {'json.loads x2 us':>17}  outcome")
    for name, raw in messages.items():
        screened = screen(raw, bounds)
        seconds = 0.5 if len(raw) < 100_000 else 3.0
        screening, parsing = [], []
        for _ in range(3):  # alternated: the host drifts
            screening.append(per_call_us(lambda raw=raw: screen(raw, bounds), seconds))
            if screened.accepted:
                parsing.append(per_call_us(lambda raw=raw: bare_parse(raw), seconds))
        parse = f"{min(parsing):>17.1f}" if parsing else f"{'-':>17}"
        outcome = "accepted" if screened.accepted else (screened.problem or "")[:60]
        print(f"{name:<30} {len(raw):>10} {min(screening):>12.1f} {parse}  {outcome}")


if __name__ == "__main__":
    main()

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

from benchmarks.harness.report import cpu_name
from benchmarks.harness.runner import per_call_us
from inference_tasks.app import broker_transport_options
from inference_tasks.broker.envelope import screen
from inference_tasks.broker.limits import limits_from_options
from inference_tasks.config import Settings
from inference_tasks.routing import EMBED_TASK
from tests.support.wire import encode, task_message

TEXT = "Support ticket: the export to PDF fails after the last update."


def bare_parse(raw: bytes) -> None:
    envelope = json.loads(raw)
    json.loads(base64.b64decode(envelope["body"]))


def main() -> None:
    bounds = limits_from_options(broker_transport_options(Settings()))
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

"""`inference-tasks embed FILE` / `classify FILE`: a file of texts through the workers, results in order.

Input: JSONL (a string, or an object with "text" and optionally "id", per line) or plain text
(one text per line); blank lines are skipped, every record keeps its source line number. The
texts go out in batches with a bounded number in flight, and results are written as soon as
they are next in input order, one JSON line per text, flushed. Re-running with the same output
resumes after the last complete line (a torn last line from a crash is dropped); the output is
checked against the input so a different file is never appended to. `.npy` output (embed only)
is written whole at the end.

Redis stays small while a big file goes through: embeddings travel as float32 base64 (a quarter
of the JSON size), every result is deleted as soon as it is written (producer.collect), and a
batch is only sent while the queue holds fewer than --max-queue-depth waiting messages (the run
waits instead of piling work onto a backlog other producers made).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_tasks import codec, producer
from inference_tasks.config import Settings
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, F32_BASE64_ENCODING, INFERENCE_QUEUE

DEFAULT_BATCH_SIZE = 64
DEFAULT_IN_FLIGHT = 8
# Send only while the inference queue holds fewer waiting messages than this (0: never check).
DEFAULT_MAX_QUEUE_DEPTH = 200  # the CLI's --max-queue-depth default too


class BulkInputError(ValueError):
    """The input file (or an existing output) cannot be used; the message names the line."""


@dataclass(frozen=True)
class Item:
    line: int
    text: str
    id: Any = None


def read_items(path: Path, max_chars: int) -> list[Item]:
    """Every text of the file, checked up front so a bad line stops the run before anything is sent."""
    jsonl = path.suffix in (".jsonl", ".ndjson")
    items = []
    with open(path, encoding="utf-8") as source:
        for number, raw in enumerate(source, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            text: Any = line
            ident: Any = None
            if jsonl:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise BulkInputError(f"{path}:{number}: not JSON ({error.msg})") from None
                if isinstance(record, dict):
                    text, ident = record.get("text"), record.get("id")
                else:
                    text = record
                if not isinstance(text, str) or not text.strip():
                    raise BulkInputError(f'{path}:{number}: expected a non-empty string or {{"text": ...}}')
            if len(text) > max_chars:
                raise BulkInputError(
                    f"{path}:{number}: {len(text)} characters, over INFERENCE_MAX_TEXT_CHARS={max_chars}"
                )
            items.append(Item(number, text, ident))
    return items


def completed_lines(output: Path, items: list[Item]) -> int:
    """How many items an earlier run already wrote to `output`; drops a torn last line."""
    if not output.exists():
        return 0
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with open(output, "r+b") as handle:
            handle.truncate(len(complete))
    lines = complete.splitlines()
    if len(lines) > len(items):
        raise BulkInputError(f"{output} holds {len(lines)} results but the input has {len(items)} texts; use --restart")
    for written, item in zip(lines, items, strict=False):
        if json.loads(written).get("line") != item.line:
            raise BulkInputError(f"{output} was written for another input (line numbers differ); use --restart")
    return len(lines)


def batches(items: list[Item], size: int) -> Iterator[list[Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def task_for(kind: str, labels: list[str] | None) -> tuple[str, Callable[[list[str]], list[Any]], dict[str, Any]]:
    """The task name, how its arguments are built from a batch's texts, and its keyword arguments."""
    if kind == "embed":
        return EMBED_TASK, lambda texts: [texts], {"encoding": F32_BASE64_ENCODING}
    return CLASSIFY_TASK, lambda texts: [texts, labels], {}


def records(kind: str, batch: list[Item], result: Any) -> list[dict[str, Any]]:
    """One output record per text of a finished batch."""
    outcomes = codec.decode_vectors(result["embeddings"], result["dim"]).tolist() if kind == "embed" else result
    out = []
    for item, outcome in zip(batch, outcomes, strict=True):
        record: dict[str, Any] = {"line": item.line}
        if item.id is not None:
            record["id"] = item.id
        if kind == "embed":
            record["embedding"] = outcome
        else:
            record.update(outcome)
        out.append(record)
    return out


def run(
    app: Any,
    kind: str,
    items: list[Item],
    on_records: Callable[[list[dict[str, Any]]], None],
    batch_size: int = DEFAULT_BATCH_SIZE,
    in_flight: int = DEFAULT_IN_FLIGHT,
    labels: list[str] | None = None,
    timeout: float = 600.0,
    progress: Callable[[int], None] = lambda _: None,
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH,
) -> None:
    """Send every batch, at most `in_flight` waiting at a time; hand records over in input order."""
    name, arguments, options = task_for(kind, labels)
    pending: deque[tuple[list[Item], Any]] = deque()
    for batch in batches(items, batch_size):
        if max_queue_depth:
            producer.wait_for_room(app, INFERENCE_QUEUE, max_queue_depth, timeout)
        sent = producer.send(app, name, args=arguments([item.text for item in batch]), kwargs=options)
        pending.append((batch, sent))
        if len(pending) >= in_flight:
            _collect(kind, pending.popleft(), on_records, timeout, progress)
    while pending:
        _collect(kind, pending.popleft(), on_records, timeout, progress)


def _collect(
    kind: str,
    sent: tuple[list[Item], Any],
    on_records: Callable[..., Any],
    timeout: float,
    progress: Callable[..., Any],
) -> None:
    batch, result = sent
    try:
        value = producer.collect(result, timeout)
    except Exception as error:  # noqa: BLE001 - report the failing lines, keep what is written
        raise BulkInputError(
            f"lines {batch[0].line}-{batch[-1].line} failed ({type(error).__name__}: {error}); "
            "results before them are written, re-run to resume"
        ) from None
    on_records(records(kind, batch, value))
    progress(len(batch))


def check_batch_size(batch_size: int, settings: Settings) -> None:
    if not 1 <= batch_size <= settings.max_batch_texts:
        raise BulkInputError(f"--batch-size must be from 1 to INFERENCE_MAX_BATCH_TEXTS={settings.max_batch_texts}")

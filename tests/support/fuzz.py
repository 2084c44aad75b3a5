"""Hostile wire messages for the fuzzer (tests/worker/test_wire_fuzzer.py), structure-aware: a valid task
envelope with one field mutated (its type, size up to and past the limits, encoding, Unicode,
headers, priority, ids, times), a body whose arguments are mutated, or raw bytes.

Each message carries the unique task id it is given where its id is a string, so its outcome (a
result, or a dead-letter entry) is found again; `Fuzzed.task_id` is None where the id was mutated
away (then only a dead-letter entry can show it).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from inference_tasks.routing import PUBLIC_TASKS
from tests.support.wire import task_message

# Past the worker's screening bounds (config/defaults.py): characters of a text, texts of a request, depth.
LONG_TEXT_CHARS = 20_001
MANY_TEXTS = 257
DEEP = 40

# Times that never park a task: past, far past the ETA horizon, or not a time at all.
TIMES = st.sampled_from(
    ["2001-01-01T00:00:00+00:00", "2999-01-01T00:00:00+00:00", "yesterday", "", "2026-13-45T99:99:99", "NaN"]
)


def nested(depth: int, leaf: Any = "a text") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def scalars() -> st.SearchStrategy[Any]:
    """Values of every JSON type and a few that JSON writers disagree on."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=40),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda t: t * 200),
        st.sampled_from(["", "\x00", "\ud7ff", "\u202e\u2066", "🙂" * 50, "a" * LONG_TEXT_CHARS, "%s%n{0}"]),
    )


def values() -> st.SearchStrategy[Any]:
    """Scalars, and containers of them: shallow, wide, and deeper than screening allows."""
    return st.one_of(
        scalars(),
        st.lists(scalars(), max_size=6),
        st.dictionaries(st.text(max_size=10), scalars(), max_size=4),
        st.integers(min_value=DEEP, max_value=DEEP * 3).map(nested),
        st.just(["x"] * MANY_TEXTS),
    )


def texts() -> st.SearchStrategy[Any]:
    """A task's texts: valid lists, and lists with one thing wrong."""
    return st.one_of(
        st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=4),
        st.lists(scalars(), min_size=0, max_size=4),
        st.just([]),
        st.just(["x"] * MANY_TEXTS),
        st.just(["y" * LONG_TEXT_CHARS]),
        values(),
    )


KWARG_NAMES = ["normalize", "encoding", "dimensions", "truncate", "prompt", "prompt_name", "model", "top_n",
               "labels", "classifier", "version", "chunk_tokens", "overlap_tokens", "nope", ""]  # fmt: skip


@dataclass
class Fuzzed:
    raw: bytes
    task_id: str | None  # the unique id to find its outcome by; None: the message has no usable id
    mutation: str


def envelope(task_id: str) -> dict[str, Any]:
    return task_message("inference.embed", [["a valid text"]], task_id=task_id)


def finish(message: dict[str, Any] | bytes, task_id: str | None, mutation: str) -> Fuzzed:
    raw = (
        message if isinstance(message, bytes) else json.dumps(message, allow_nan=True).encode("utf-8", "surrogatepass")
    )
    return Fuzzed(raw, task_id, mutation)


@st.composite
def header_mutation(draw: st.DrawFn, task_id: str) -> Fuzzed:
    message = envelope(task_id)
    field = draw(st.sampled_from(["task", "id", "eta", "expires", "retries", "timelimit", "root_id", "parent_id",
                                  "group", "inference_sent_at", "inference_durable", "sidekiq_reply", "lang",
                                  "argsrepr", "stamped_headers", "new header"]))  # fmt: skip
    if field == "task":
        names = [*PUBLIC_TASKS, "celery.chord_unlock", "celery.backend_cleanup", "inference.", "INFERENCE.EMBED"]
        value = draw(st.one_of(st.sampled_from(names), values()))
    elif field in ("eta", "expires"):
        value = draw(st.one_of(TIMES, scalars()))
    elif field == "id":
        value = draw(st.one_of(scalars().filter(lambda v: not isinstance(v, str)), st.just(None)))
        message["headers"]["id"] = value
        return finish(message, None, "headers.id")
    else:
        value = draw(values())
    message["headers"][field] = value
    return finish(message, task_id, f"headers.{field}")


@st.composite
def envelope_mutation(draw: st.DrawFn, task_id: str) -> Fuzzed:
    message = envelope(task_id)
    field = draw(st.sampled_from(["content-type", "content-encoding", "body", "headers", "properties",
                                  "properties.priority", "properties.delivery_tag", "properties.delivery_info",
                                  "properties.body_encoding", "properties.correlation_id", "drop"]))  # fmt: skip
    value = draw(values())
    if field == "drop":
        del message[draw(st.sampled_from(["body", "headers", "properties", "content-type"]))]
    elif field.startswith("properties."):
        message["properties"][field.split(".", 1)[1]] = value
    else:
        message[field] = value
    # Without its headers (or with them replaced) the id is gone: only its dead letter shows it.
    return finish(message, task_id if field.startswith("properties.") or field.startswith("content") else None, field)


@st.composite
def body_mutation(draw: st.DrawFn, task_id: str) -> Fuzzed:
    """Valid framing, base64 of a body whose arguments are wrong in one way."""
    task = draw(st.sampled_from(PUBLIC_TASKS))
    kwargs = draw(st.dictionaries(st.sampled_from(KWARG_NAMES), values(), max_size=3))
    args = draw(st.one_of(st.lists(texts(), max_size=3), values()))
    body = draw(st.one_of(
        st.just([args, kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]),
        st.just([args, kwargs, draw(values())]),
        st.just({"args": args}),
        values(),
    ))  # fmt: skip
    message = task_message(task, [], task_id=task_id)
    encoded = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    message["body"] = base64.b64encode(encoded).decode() if draw(st.booleans()) else encoded.decode("latin-1")
    return finish(message, task_id, f"body of {task}")


@st.composite
def raw_bytes(draw: st.DrawFn, task_id: str) -> Fuzzed:
    valid = json.dumps(envelope(task_id)).encode()
    kind = draw(st.sampled_from(["random", "truncated", "not utf-8", "not json", "empty", "json scalar"]))
    if kind == "random":
        raw = draw(st.binary(min_size=1, max_size=200))
    elif kind == "truncated":
        raw = valid[: draw(st.integers(min_value=1, max_value=len(valid) - 1))]
    elif kind == "not utf-8":
        raw = valid[:20] + b"\xff\xfe\x80" + valid[20:]
    elif kind == "not json":
        raw = b"{'headers': {'task': 'inference.embed'}}"
    elif kind == "empty":
        raw = b""
    else:
        raw = json.dumps(draw(scalars())).encode("utf-8", "surrogatepass")
    return Fuzzed(raw, None, f"raw {kind}")


def hostile_message(task_id: str) -> st.SearchStrategy[Fuzzed]:
    """One hostile message; `task_id` (unique per message) is its id unless the id is what it mutates."""
    return st.one_of(header_mutation(task_id), envelope_mutation(task_id), body_mutation(task_id), raw_bytes(task_id))

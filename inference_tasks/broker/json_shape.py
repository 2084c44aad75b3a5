"""How deep and how big a JSON text is, measured on its bytes before anything parses it.

A valid JSON text can still be poison: `[[[[...]]]]` 900 levels deep decodes fine below Python's
recursion limit, then kills whichever code walks it recursively next (pickling the job for a
prefork child did: the whole worker exited, and every worker after it). So screening measures
nesting and value counts on the raw bytes first, with C-speed passes (bytes.split and join blank
out strings, bytes.translate, itertools.accumulate), and only then lets json.loads build objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

_OPENERS = b"[{"
_CLOSERS = b"]}"
_WHITESPACE = b" \t\r\n"
# bytes.translate deletes every byte listed here: all but the four brackets.
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in _OPENERS + _CLOSERS)
_NOT_OPENERS_OR_COMMAS = bytes(byte for byte in range(256) if byte not in _OPENERS + b",")
# +1 for an opening bracket, -1 for a closing one, indexed by byte value.
_DEPTH_STEP = [1 if byte in _OPENERS else -1 if byte in _CLOSERS else 0 for byte in range(256)]


@dataclass(frozen=True)
class Shape:
    """How many values the containers hold (array elements plus object members), and the deepest
    nesting of arrays and objects (a scalar is 0, `[1]` is 1); None when not measured."""

    items: int
    depth: int | None


def measure(raw: bytes, max_items: int | None = None) -> Shape:
    """The shape of a JSON text, from its bytes alone.

    Exact for valid JSON; for anything else a bounded, harmless estimate (the parse that follows
    refuses it anyway). Strings are blanked first, so brackets and commas inside texts never count.
    Counting is cheap; the depth pass costs more per bracket, so past `max_items` values (a text
    refused for its size anyway) it is skipped: every container but the outermost is a value, so the
    brackets it would walk are bounded by the items allowed.
    """
    skeleton = _without_strings(raw).translate(None, _WHITESPACE)
    # Each non-empty container holds one value more than it has commas.
    empty = skeleton.count(b"[]") + skeleton.count(b"{}")
    non_empty = skeleton.count(b"[") + skeleton.count(b"{") - empty
    items = skeleton.count(b",") + max(non_empty, 0)
    if max_items is not None and items > max_items:
        return Shape(items, None)
    brackets = skeleton.translate(None, _NOT_BRACKETS)
    depth = max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)
    return Shape(items, max(depth, 0))


def bounded(raw: bytes, max_depth: int, max_items: int) -> Shape:
    """The shape of a JSON text where it matters, cheaply where it does not.

    Every level of nesting opens a bracket and every value past a container's first follows a comma,
    so the counts of `[`, `{` and `,` in the raw bytes (strings included) bound depth and items from
    above. When those bounds are already within the limits (nearly every real message) they are
    returned as they are, for two byte counts instead of the full pass; otherwise `measure` gives the
    exact figures the refusal reports.
    """
    structural = raw.translate(None, _NOT_OPENERS_OR_COMMAS)  # one pass; what is left is short
    commas = structural.count(b",")
    opened = len(structural) - commas
    if opened <= max_depth and opened + commas <= max_items:
        return Shape(opened + commas, opened)
    return measure(raw, max_items)


def _without_strings(raw: bytes) -> bytes:
    """`raw` with every string replaced by `0`.

    Inside JSON strings a backslash always starts an escape; replacing backslash pairs first, then
    escaped quotes (bytes.replace works left to right, as escapes pair up), leaves only quotes that
    open or close strings, so the even pieces between quotes are everything outside strings (a
    regex doing the same was slower than json.loads itself: docs/benchmarks.md).
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    return b"0".join(raw.split(b'"')[::2])


def depth_of(value: Any) -> int:
    """The nesting depth of a decoded JSON value (iterative: any depth json.loads produced is walked)."""
    deepest = 0
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth + 1)
        pending.extend((child, depth + 1) for child in item)
    return deepest

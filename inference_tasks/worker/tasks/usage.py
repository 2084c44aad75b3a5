"""What a request cost, reported on every inference result as `usage` (for billing and SLOs):
input tokens as the model's tokenizer counts them after truncation, which texts were cut, the
milliseconds of model compute, and how long the task waited in the queue.

`queue_ms` needs the producer's send time: the Python app and the Ruby client stamp it in the
message header routing.SENT_AT_HEADER (Unix seconds); a raw producer that does not gets null. It
measures from that stamp to the moment the task's work began (its micro-batch's shared forward pass,
or its own), across two hosts' clocks: keep them synchronised (NTP); a stamp from the future counts 0.
`inference_ms` is the task's own time in the child plus its share of a micro-batch's shared pass
(shared by number of texts). `cached` counts the texts (or chunks) whose vectors the fleet's embedding
cache answered (worker/cache/; 0 when the worker has none or the task sent cache=false).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from inference_tasks.routing import SENT_AT_HEADER
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.kinds.shared_pass import PreEncoded


@dataclass
class TokenCount:
    """Tokens the model read (each text's count, capped at its limit) and the indexes of texts it cut."""

    tokens: int = 0
    truncated: list[int] = field(default_factory=list)

    def add(self, other: TokenCount, offset: int = 0) -> None:
        self.tokens += other.tokens
        self.truncated.extend(index + offset for index in other.truncated)


def count_tokens(
    task: str, counts: list[int], limit: int | None, truncate: bool, what: str = "texts"
) -> TokenCount:  # fmt: skip
    """`counts` (one per text, before truncation) against the model's `limit` (None: none). With
    truncate false, InvalidInput names the first text over the limit, its count and the limit."""
    if limit is None:
        return TokenCount(sum(counts), [])
    over = [index for index, count in enumerate(counts) if count > limit]
    if over and not truncate:
        first = over[0]
        raise InvalidInput(
            f"{task}: {what}[{first}] is {counts[first]} tokens, more than the model's limit of {limit} "
            "(truncate=false); shorten it, split it (inference.embed_chunks), or send truncate=true to cut it"
        )
    return TokenCount(sum(min(count, limit) for count in counts), over)


@dataclass
class TaskClock:
    """Started when a task's body starts; `usage` reads it when the body is done."""

    sent_at: float | None
    wall_start: float = field(default_factory=time.time)
    perf_start: float = field(default_factory=time.perf_counter)

    @classmethod
    def start(cls, request: Any) -> TaskClock:
        stamp: Any = request.get(SENT_AT_HEADER) if hasattr(request, "get") else None
        if isinstance(stamp, int | float) and not isinstance(stamp, bool) and stamp > 0:
            return cls(float(stamp))
        return cls(None)

    def usage(self, count: TokenCount, shared: PreEncoded | None, cached: int = 0) -> dict[str, Any]:
        """The `usage` object of a result; `shared`: the micro-batch share its vectors came from;
        `cached`: how many of its texts (or chunks) the embedding cache answered."""
        began = shared.started_at if shared is not None and shared.started_at else self.wall_start
        own = time.perf_counter() - self.perf_start
        inference_s = own + (shared.seconds if shared is not None else 0.0)
        queue_ms = None if self.sent_at is None else round(max(0.0, began - self.sent_at) * 1000, 3)
        return {
            "tokens": count.tokens,
            "truncated": count.truncated,
            "inference_ms": round(inference_s * 1000, 3),
            "queue_ms": queue_ms,
            "cached": cached,
        }

"""What the token-bounded passes (inference_tasks/worker/runtimes/passes.py) are measured against: the padded tokens
a grouping computes, and sentence-transformers' own fixed-size grouping (benchmarks/token_batches.py)."""

from __future__ import annotations

from collections.abc import Sequence


def padded_tokens(counts: Sequence[int], passes: Sequence[Sequence[int]]) -> int:
    """Tokens the passes compute, padding included: each pass's texts times its longest."""
    return sum(len(group) * max(counts[index] for index in group) for group in passes if group)


def fixed_size_passes(lengths: Sequence[int], max_texts: int) -> list[list[int]]:
    """sentence-transformers' own grouping, for comparison: sorted by `lengths` (characters), longest
    first, cut every `max_texts` texts."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    return [order[start : start + max_texts] for start in range(0, len(order), max_texts)]

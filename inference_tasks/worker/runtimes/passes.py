"""Forward passes bounded by tokens as well as texts, longest texts first, so padding stays small.

A forward pass pads every text to the longest one in it: 26 one-liners sharing a pass with six
250-token texts cost as much as 32 long texts. sentence-transformers sorts a call's texts by
character length and cuts them into passes of a fixed number of texts; here they are sorted by the
model's own token counts and a pass also closes when its padded size (texts x longest) would pass
INFERENCE_MICROBATCH_MAX_TOKENS. Used for a micro-batch's shared encode and for a task's own encode
alike (both call the model's encode). Measurements: docs/benchmarks-log.md, "Token-bounded passes".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.worker.runtimes.capabilities import TextModel


def forward_passes(counts: Sequence[int], max_texts: int, max_tokens: int | None) -> list[list[int]]:
    """The indexes of the texts whose token counts are `counts`, grouped into passes: longest first,
    at most `max_texts` texts and (when `max_tokens` is set) at most `max_tokens` padded tokens per
    pass; a text longer than `max_tokens` on its own goes alone."""
    order = sorted(range(len(counts)), key=lambda index: (-counts[index], index))
    passes: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = counts[current[0]] if current else counts[index]
        full = len(current) >= max_texts or (max_tokens is not None and longest * (len(current) + 1) > max_tokens)
        if current and full:
            passes.append(current)
            current = []
        current.append(index)
    if current:
        passes.append(current)
    return passes


def model_passes(model: TextModel, texts: Sequence[str]) -> list[list[int]]:
    """The token-bounded passes of `texts` for `model`: its batch size, its pass bound, each text's
    word pieces as it reads them (cut at its limit)."""
    limit = model.max_tokens
    counts = [min(count, limit) if limit else count for count in model.token_counts(texts)]
    return forward_passes(counts, model.batch_size, model.max_pass_tokens)


def encode_in_passes(
    model: TextModel, texts: list[str], encode: Callable[[list[str]], np.ndarray]
) -> np.ndarray:  # fmt: skip
    """`encode` over the token-bounded passes of `texts` (longest first), the vectors put back in input order."""
    import numpy as np

    groups = model_passes(model, texts)
    if len(groups) == 1:
        return encode(texts)
    vectors: np.ndarray | None = None
    for group in groups:
        part = encode([texts[index] for index in group])
        if vectors is None:
            vectors = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        vectors[group] = part
    assert vectors is not None
    return vectors

"""Steps every inference task shares: the tokens it reads, its vectors as asked, and the usage it reports.
Kept apart from the task bodies (embedding.py, retrieval.py, sparse.py, training.py) so the contract is one
piece of code, whatever the task; the model each task needs comes from the holder (ModelHolder.dense, .sparse)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inference_tasks.contract.options import EncodeOptions
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.kinds.model_holder import ModelHolder
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.tasks import calibration
from inference_tasks.worker.tasks.usage import TokenCount, count_tokens
from inference_tasks.worker.tasks.vectors import BUCKETED_ENCODINGS, encoded, shaped

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.capabilities import TextModel

# Bad input is an expected outcome: Celery records FAILURE without a traceback in the log (each
# task's `throws`).
EXPECTED_ERRORS = (InvalidInput,)


def read_tokens(task: str, model: TextModel, texts: list[str], truncate: bool, what: str = "texts") -> TokenCount:
    """What the model reads of `texts` (already prompted), failing on a text over its limit unless truncate."""
    return count_tokens(task, model.token_counts(texts), model.max_tokens, truncate, what)


def vectors_as_asked(
    holder: ModelHolder, settings: Settings, vectors: np.ndarray, options: EncodeOptions
) -> dict[str, Any]:  # fmt: skip
    """{"dim", "embeddings"[, "count", "encoding"]} for `vectors` shaped and encoded as the options say."""
    vectors = shaped(vectors, options.dimensions, options.normalize)
    ranges = None
    if options.encoding in BUCKETED_ENCODINGS:
        ranges = calibration.ranges(holder, settings, options.normalize, options.dimensions)
    return encoded(vectors, options.encoding, ranges)


def note_tokens(count: TokenCount) -> None:
    """Add a task's input tokens to its slot's count (the exporter's inference_tokens_total), and what its
    embedding cache did (inference_cache_*_total)."""
    ctx = current()
    ctx.slots.add_tokens(ctx.process.pool_slot, count.tokens)
    if ctx.model.cache is not None:
        ctx.slots.add_cache(ctx.process.pool_slot, ctx.model.cache.store.take_tally())

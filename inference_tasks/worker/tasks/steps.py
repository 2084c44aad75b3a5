"""Steps every inference task shares: the model it needs, the tokens it reads, its vectors as asked,
and the usage it reports. Kept apart from the task bodies (embedding.py, retrieval.py, sparse.py, training.py) so the
contract is one piece of code, whatever the task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, SPARSE_KIND
from inference_tasks.contract.options import EncodeOptions
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.interface import Embedder
from inference_tasks.worker.runtimes.models import ModelHolder
from inference_tasks.worker.tasks import calibration
from inference_tasks.worker.tasks.usage import TokenCount, count_tokens
from inference_tasks.worker.tasks.vectors import BUCKETED_ENCODINGS, encoded, shaped

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.sparse_model import SparseEncoderModel

# Bad input is an expected outcome: Celery records FAILURE without a traceback in the log (each
# task's `throws`).
EXPECTED_ERRORS = (InvalidInput,)


def embedding_model(task: str, holder: ModelHolder, alias: str) -> Embedder:
    """The loaded model, which must make dense vectors: a cross-encoder serves inference.rerank only, a
    sparse encoder inference.embed_sparse only."""
    model = holder.get()
    if model.kind == CROSS_ENCODER_KIND:
        raise InvalidInput(
            f"{task}: model {alias!r} is a cross-encoder; it serves inference.rerank only (it makes no vectors)"
        )
    if model.kind == SPARSE_KIND:
        raise InvalidInput(
            f"{task}: model {alias!r} is a sparse encoder; it serves inference.embed_sparse only (it makes no "
            "dense vectors)"
        )
    return model


def sparse_model(task: str, holder: ModelHolder, alias: str) -> SparseEncoderModel:
    """The loaded model, which must be a sparse encoder (catalogue kind "sparse")."""
    model = holder.get()
    if model.kind != SPARSE_KIND:
        what = "a cross-encoder" if model.kind == CROSS_ENCODER_KIND else "a dense embedding model"
        raise InvalidInput(
            f"{task}: model {alias!r} is {what}; it needs a sparse encoder: send the task to the queue of a "
            f"catalogue entry of kind {SPARSE_KIND!r} (a SPLADE model)"
        )
    return cast("SparseEncoderModel", model)


def read_tokens(task: str, model: Embedder, texts: list[str], truncate: bool, what: str = "texts") -> TokenCount:
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
    """Add a task's input tokens to its slot's count (the exporter's inference_tokens_total)."""
    ctx = current()
    ctx.slots.add_tokens(ctx.process.pool_slot, count.tokens)

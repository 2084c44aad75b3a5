"""The "sparse" kind: a SPLADE model (sentence-transformers' SparseEncoder) on torch, making sparse vectors;
it serves inference.embed_sparse only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from inference_tasks.config.catalogue import SPARSE_KIND, ModelEntry
from inference_tasks.routing import EMBED_SPARSE_TASK
from inference_tasks.worker.cache.identity import SPARSE
from inference_tasks.worker.kinds.model_kind import WARMUP_TEXTS, ModelKind
from inference_tasks.worker.kinds.shared_pass import PlannedEncode, planned_texts
from inference_tasks.worker.runtimes.torch.loader import load_sparse_encoder

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import ServedModel, SparseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions


class SparseEmbeddingKind(ModelKind):
    name = SPARSE_KIND
    called = "a sparse encoder"
    serves_instead = "it serves inference.embed_sparse only (it makes no dense vectors)"
    cached_rows = SPARSE

    def load(self, source: str, device: str, options: LoadOptions) -> SparseEncoder:
        """On torch whatever the options say (the catalogue refuses another backend for this kind)."""
        return load_sparse_encoder(source, device)

    def warm_up(self, model: ServedModel) -> None:
        cast("SparseEncoder", model).encode_sparse(WARMUP_TEXTS)

    def plan(self, task: str, task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
        if task != EMBED_SPARSE_TASK:
            return None  # refused in the child
        return planned_texts(task, task_id, call, entry)

    def pass_groups(self, plans: Sequence[PlannedEncode]) -> list[list[PlannedEncode]]:
        """Every text in one pass (sparse vectors are not normalized)."""
        return [[plan for plan in plans if plan.query is None]]

    def run_pass(self, model: ServedModel, group: list[PlannedEncode]) -> Any:
        return cast("SparseEncoder", model).encode_sparse([text for plan in group for text in plan.texts])

    def sparse_encoder(self, model: ServedModel, task: str, alias: str) -> SparseEncoder:
        return cast("SparseEncoder", model)

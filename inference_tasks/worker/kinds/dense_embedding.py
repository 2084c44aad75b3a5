"""The "embedding" kind: a dense encoder on any runtime (runtimes/registry.py), serving every task but
inference.embed_sparse; a rerank compares the query's vector with each document's (a bi-encoder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from inference_tasks.config.catalogue import EMBEDDING_KIND, ModelEntry
from inference_tasks.contract.options import document_prompt, query_prompt
from inference_tasks.routing import EMBED_SPARSE_TASK, RERANK_TASK
from inference_tasks.worker.cache.identity import DENSE
from inference_tasks.worker.kinds.model_kind import WARMUP_TEXTS, ModelKind
from inference_tasks.worker.kinds.shared_pass import PlannedEncode, plain_texts, planned_texts
from inference_tasks.worker.runtimes.registry import load_dense_encoder

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder, ServedModel
    from inference_tasks.worker.runtimes.load_options import LoadOptions


class DenseEmbeddingKind(ModelKind):
    name = EMBEDDING_KIND
    called = "a dense embedding model"
    cached_rows: ClassVar[str | None] = DENSE

    def load(self, source: str, device: str, options: LoadOptions) -> DenseEncoder:
        return load_dense_encoder(source, device, options)

    def warm_up(self, model: ServedModel) -> None:
        encoder = cast("DenseEncoder", model)
        vectors = encoder.encode(WARMUP_TEXTS, normalize=True)
        encoder.dim = encoder.dim or int(vectors.shape[1])

    def plan(self, task: str, task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
        if task == EMBED_SPARSE_TASK:
            return None  # refused in the child: a dense model makes no sparse vectors
        if task != RERANK_TASK:
            return planned_texts(task, task_id, call, entry)
        query, documents, cache = call["query"], call["documents"], call.get("cache", True)
        if not plain_texts([query]) or not plain_texts(documents) or not isinstance(cache, bool):
            return None
        prefix = document_prompt(entry)
        read = [query_prompt(entry) + query, *(prefix + document for document in documents)]
        return PlannedEncode(task_id, read, True, cache=cache)

    def pass_groups(self, plans: Sequence[PlannedEncode]) -> list[list[PlannedEncode]]:
        """One pass per normalize flag (a bi-encoder rerank's query and documents are normalized texts)."""
        return [
            [plan for plan in plans if plan.query is None and plan.normalize is normalize]
            for normalize in (True, False)
        ]

    def run_pass(self, model: ServedModel, group: list[PlannedEncode]) -> Any:
        encoder = cast("DenseEncoder", model)
        return encoder.encode([text for plan in group for text in plan.texts], normalize=group[0].normalize)

    def dense_encoder(self, model: ServedModel, task: str, alias: str) -> DenseEncoder:
        return cast("DenseEncoder", model)

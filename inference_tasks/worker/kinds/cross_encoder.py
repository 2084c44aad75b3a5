"""The "cross-encoder" kind: sentence-transformers' CrossEncoder on torch, scoring (query, document) pairs;
it serves inference.rerank only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, ModelEntry
from inference_tasks.routing import RERANK_TASK
from inference_tasks.worker.kinds.model_kind import WARMUP_TEXTS, ModelKind
from inference_tasks.worker.kinds.shared_pass import PlannedEncode, plain_texts
from inference_tasks.worker.runtimes.torch.loader import load_pair_scorer

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import PairScorer, ServedModel
    from inference_tasks.worker.runtimes.load_options import LoadOptions


class CrossEncoderKind(ModelKind):
    name = CROSS_ENCODER_KIND
    called = "a cross-encoder"
    serves_instead = "it serves inference.rerank only (it makes no vectors)"

    def load(self, source: str, device: str, options: LoadOptions) -> PairScorer:
        """On torch whatever the options say (the catalogue refuses another backend for this kind)."""
        return load_pair_scorer(source, device)

    def warm_up(self, model: ServedModel) -> None:
        cast("PairScorer", model).score_pairs([(WARMUP_TEXTS[0], text) for text in WARMUP_TEXTS])

    def plan(self, task: str, task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
        if task != RERANK_TASK:
            return None  # refused in the child
        query, documents = call["query"], call["documents"]
        if not plain_texts([query]) or not plain_texts(documents):
            return None
        return PlannedEncode(task_id, documents, True, query=query)

    def pass_groups(self, plans: Sequence[PlannedEncode]) -> list[list[PlannedEncode]]:
        """Every rerank's pairs in one pass."""
        return [[plan for plan in plans if plan.query is not None]]

    def run_pass(self, model: ServedModel, group: list[PlannedEncode]) -> Any:
        pairs = [(plan.query or "", text) for plan in group for text in plan.texts]
        return cast("PairScorer", model).score_pairs(pairs)

    def pair_scorer(self, model: ServedModel) -> PairScorer:
        return cast("PairScorer", model)

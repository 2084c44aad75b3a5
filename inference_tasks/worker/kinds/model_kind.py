"""What every model kind does for a worker, as one base class: a kind loads its model, warms it up, plans
and runs its micro-batches' shared passes, and hands each task the capability it needs or refuses the
task with a message naming what the model serves instead."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from inference_tasks.config.catalogue import SPARSE_KIND
from inference_tasks.validation import InvalidInput

if TYPE_CHECKING:
    from inference_tasks.config.catalogue import ModelEntry
    from inference_tasks.worker.kinds.shared_pass import PlannedEncode
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder, PairScorer, ServedModel, SparseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

WARMUP_TEXTS = ("warm-up", "The first batch pays for lazy initialisation; no request should.")


class ModelKind(ABC):
    """One catalogue kind. Stateless: the registry hands out a fresh one; the loaded model is the holder's."""

    # The catalogue's name of this kind (config/catalogue.py), and what messages call such a model.
    name: ClassVar[str]
    called: ClassVar[str]
    # Why a task that needs dense vectors is refused (a kind that makes none says what it serves).
    serves_instead: ClassVar[str] = ""
    # What the embedding cache (worker/cache/) may keep of this kind's passes: one row per text,
    # "dense" or "sparse"; None: nothing (a pair's score is not a text's own; a lookup is cheaper).
    cached_rows: ClassVar[str | None] = None

    @abstractmethod
    def load(self, source: str, device: str, options: LoadOptions) -> ServedModel:
        """The model at `source`, loaded but never run (this may be a main process that forks after)."""

    @abstractmethod
    def warm_up(self, model: ServedModel) -> None:
        """A first tiny pass, in the process that serves, so lazy initialisation is not paid by a request."""

    @abstractmethod
    def plan(self, task: str, task_id: str, call: dict[str, Any], entry: ModelEntry) -> PlannedEncode | None:
        """What task `task` (its arguments bound by name in `call`) will compute with this kind's model,
        or None when it computes nothing shareable or its arguments are not plainly valid (main process)."""

    @abstractmethod
    def pass_groups(self, plans: Sequence[PlannedEncode]) -> list[list[PlannedEncode]]:
        """The plans that can share one forward pass, group by group (the child)."""

    @abstractmethod
    def run_pass(self, model: ServedModel, group: list[PlannedEncode]) -> Any:
        """One shared pass over a group's texts: one output row per text, in the group's order."""

    def dense_encoder(self, model: ServedModel, task: str, alias: str) -> DenseEncoder:
        """`model` as a dense encoder, for a task that needs vectors; refused unless this kind makes them."""
        raise InvalidInput(f"{task}: model {alias!r} is {self.called}; {self.serves_instead}")

    def sparse_encoder(self, model: ServedModel, task: str, alias: str) -> SparseEncoder:
        """`model` as a sparse encoder (inference.embed_sparse); refused unless this kind makes sparse vectors."""
        raise InvalidInput(
            f"{task}: model {alias!r} is {self.called}; it needs a sparse encoder: send the task to the queue of a "
            f"catalogue entry of kind {SPARSE_KIND!r} (a SPLADE model)"
        )

    def pair_scorer(self, model: ServedModel) -> PairScorer | None:
        """`model` as a pair scorer when this kind scores (query, document) pairs, else None (rerank then
        compares vectors)."""
        return None

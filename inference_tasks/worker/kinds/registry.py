"""Model kinds by catalogue name: the one place that maps a catalogue entry's `kind` to the class that
serves it. Everything else asks the kind object (load, warm up, plan and run shared passes, guard
tasks); a new kind is a module in this folder plus one line here (and its name in the catalogue).
tests/unit/test_kinds.py pins that no other worker module compares kinds."""

from __future__ import annotations

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, EMBEDDING_KIND, SPARSE_KIND, STATIC_KIND, ModelEntry
from inference_tasks.worker.kinds.cross_encoder import CrossEncoderKind
from inference_tasks.worker.kinds.dense_embedding import DenseEmbeddingKind
from inference_tasks.worker.kinds.model_kind import ModelKind
from inference_tasks.worker.kinds.sparse_embedding import SparseEmbeddingKind
from inference_tasks.worker.kinds.static_embedding import StaticEmbeddingKind

MODEL_KINDS: dict[str, type[ModelKind]] = {
    EMBEDDING_KIND: DenseEmbeddingKind,
    CROSS_ENCODER_KIND: CrossEncoderKind,
    SPARSE_KIND: SparseEmbeddingKind,
    STATIC_KIND: StaticEmbeddingKind,
}


def kind_named(kind: str) -> ModelKind:
    """The kind a catalogue entry names (the catalogue checked the name when it was read)."""
    return MODEL_KINDS[kind]()


def kind_of(entry: ModelEntry) -> ModelKind:
    """The kind of catalogue entry `entry`."""
    return kind_named(entry.kind)

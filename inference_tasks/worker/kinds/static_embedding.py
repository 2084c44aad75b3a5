"""The "static" kind: a model2vec static model (`inference-tasks distil-model`), a dense encoder on
model2vec's runtime serving every dense task (embed, classify, train_classifier, bi-encoder rerank,
embed_chunks) at a lookup's cost. Everything but its name is the dense kind's."""

from __future__ import annotations

from inference_tasks.config.catalogue import STATIC_KIND
from inference_tasks.worker.kinds.dense_embedding import DenseEmbeddingKind


class StaticEmbeddingKind(DenseEmbeddingKind):
    name = STATIC_KIND
    called = "a static embedding model"
    # A static model computes a vector faster than Redis can return one (docs/cache.md): never cached.
    cached_rows = None

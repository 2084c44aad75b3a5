"""The base of every embedding model's runtime (torch, OpenVINO, numpy): its kind, and no pair scoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from inference_tasks.catalogue import EMBEDDING_KIND

if TYPE_CHECKING:
    import numpy as np


class EmbeddingModel:
    """What every embedding model shares: its kind, and no pair scoring (a cross-encoder's job)."""

    kind = EMBEDDING_KIND

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} is an embedding model; it does not score (query, document) pairs")

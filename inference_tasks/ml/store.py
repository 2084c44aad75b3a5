"""Redis records that outlive a task: trained classifier heads (versioned) and embed-corpus pages.

Heads live under `inference-tasks:classifier:<name>:v<version>` with `...:latest` naming the newest
version. Every version stays retrievable (training again never overwrites) and heads do not
expire: with AOF they survive Redis restarts like the queue does.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from inference_tasks.codec import decode_vectors, encode_vectors
from inference_tasks.lua import script
from inference_tasks.redis_access.keys import CLASSIFIER_NAMES_KEY
from inference_tasks.redis_access.keys import classifier_key as _key

# Runtimes whose vectors for the same model pass the accuracy gate against torch's (min cosine >= 0.99
# on held-out texts: runtimes/accuracy_gate.py; OpenVINO f32 measured >= 0.9999, its int8 and
# CTranslate2's int8 >= 0.994, labels agreeing >= 99 %): a head trained with one serves on any other.
# auto serves one or several of them, each gated when it was measured.
INTERCHANGEABLE_RUNTIMES = frozenset({"torch", "openvino", "ctranslate2", "auto"})


class UnknownClassifier(LookupError):
    """No head with that name (or version) has been trained."""


@dataclass
class ClassifierHead:
    """A linear softmax classifier over one embedding model's unit-norm embeddings."""

    name: str
    model: str
    labels: list[str]
    weights: np.ndarray  # (labels, dim), float32
    bias: np.ndarray  # (labels,), float32
    metrics: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    created_at: float = field(default_factory=time.time)
    # The runtime and precision that embedded its training texts (heads stored before this field
    # existed were all torch f32). Vectors of every runtime in INTERCHANGEABLE_RUNTIMES agree to a
    # cosine of 0.9999 or better (tests/worker/test_openvino.py), so a head trained on one serves on the other.
    backend: str = "torch"
    precision: str | None = "f32"

    def runtime_problem(self, backend: str) -> str | None:
        """Why this head cannot classify vectors from `backend`, or None when it can."""
        if {self.backend, backend} <= INTERCHANGEABLE_RUNTIMES:
            return None
        return (
            f"classifier {self.name!r} v{self.version} was trained on {self.backend} embeddings, whose vectors are "
            f"not known to match this worker's {backend} ones; train it again on this worker"
        )

    def probabilities(self, embeddings: np.ndarray) -> np.ndarray:
        """Softmax over the labels, one row per embedding."""
        logits = embeddings @ self.weights.T + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "version": self.version,
                "model": self.model,
                "dim": int(self.weights.shape[1]),
                "labels": self.labels,
                "weights": encode_vectors(self.weights),
                "bias": encode_vectors(self.bias),
                "metrics": self.metrics,
                "created_at": self.created_at,
                "backend": self.backend,
                "precision": self.precision,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> ClassifierHead:
        record = json.loads(raw)
        labels = record["labels"]
        return cls(
            name=record["name"],
            model=record["model"],
            labels=labels,
            weights=decode_vectors(record["weights"], record["dim"]),
            bias=decode_vectors(record["bias"]),
            metrics=record["metrics"],
            version=record["version"],
            created_at=record["created_at"],
            backend=record.get("backend", "torch"),
            precision=record.get("precision", "f32"),
        )


def save_head(client: redis.Redis, head: ClassifierHead) -> int:
    """Store `head` as the next version of its name; returns that version."""
    head.version = int(client.incr(_key(head.name, "counter")))
    keys = [_key(head.name, f"v{head.version}"), _key(head.name, "latest"), CLASSIFIER_NAMES_KEY]
    client.eval(script("save_head"), len(keys), *keys, head.version, head.to_json(), head.name)
    return head.version


def latest_version(client: redis.Redis, name: str) -> int | None:
    raw = client.get(_key(name, "latest"))
    return int(raw) if raw is not None else None


def load_head(client: redis.Redis, name: str, version: int | None = None) -> ClassifierHead:
    """The head `name` at `version` (default: the latest); UnknownClassifier if there is none."""
    if version is None:
        version = latest_version(client, name)
        if version is None:
            raise UnknownClassifier(f"no classifier named {name!r}; train one with inference.train_classifier")
    raw = client.get(_key(name, f"v{version}"))
    if raw is None:
        raise UnknownClassifier(f"classifier {name!r} has no version {version}")
    return ClassifierHead.from_json(raw)

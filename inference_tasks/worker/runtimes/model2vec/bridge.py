"""A static model in its teacher's vector space: `distil-model ALIAS --space teacher`.

A static vector is the mean of its tokens' table rows, so a linear map applied to every row is the same
map applied to every vector. The bridge is that map, static space -> teacher space, fitted by ridge least
squares on texts both models encode (the teacher once, at deploy time, in the command's process), then
multiplied into the table: the result is an ordinary model2vec model whose vectors sit beside the
teacher's. Documents indexed by it can be searched with the teacher's query vectors, which a two-stage
search computes anyway to order the candidates (docs/configuration.md, "A static model in its teacher's
space").

The map is only as good as its texts are like the documents: fitted on a sample of the corpus to be
indexed it brings the teacher's answer into the static top 50 for every query of the package's
benchmark; on random vocabulary words it does not (docs/benchmarks-log.md, "Two-stage retrieval in the
teacher's space").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# Ridge strength on unit vectors: retrieval did not move between 1e-3 and 1 (docs/benchmarks-log.md).
RIDGE = 0.1
# Texts the fit needs at least: fewer than the static dimensions leave the map underdetermined.
MIN_FIT_TEXTS = 100
# Texts used when none are given: sentences of the packaged calibration corpus's words.
DEFAULT_FIT_TEXTS = 1000
# The share of the fit texts held out to report how close the bridged vectors come to the teacher's.
HELD_OUT_SHARE = 0.2


class FitTextsError(ValueError):
    """`--fit-texts` names no usable file; the message says what is allowed."""


@dataclass(frozen=True)
class Bridge:
    matrix: np.ndarray  # static dims x teacher dims
    texts: int
    origin: str
    digest: str
    held_out_cosine: float

    def record(self) -> dict[str, Any]:
        return {
            "texts": self.texts, "from": self.origin, "digest": self.digest, "ridge": RIDGE,
            "held_out_cosine": round(self.held_out_cosine, 4),
        }  # fmt: skip


def fit_texts(path: Path | None) -> tuple[list[str], str]:
    """The texts to fit on and where they came from: one text per line of `path` (blank lines skipped), or
    DEFAULT_FIT_TEXTS sentences of the packaged calibration corpus's words."""
    if path is None:
        from inference_tasks.worker.runtimes.held_out import sentences

        return sentences(DEFAULT_FIT_TEXTS), "calibration-corpus sentences"
    try:
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        problem = f"--fit-texts: cannot read {path} ({error}); give a UTF-8 file, one text per line"
        raise FitTextsError(problem) from None
    if len(texts) < MIN_FIT_TEXTS:
        raise FitTextsError(
            f"--fit-texts: {path} holds {len(texts)} texts; the bridge needs at least {MIN_FIT_TEXTS} (one per "
            "line, a sample of the documents you will index)"
        )
    return texts, path.name


def fit_bridge(static: Any, teacher: Any, texts: list[str], origin: str) -> Bridge:
    """The ridge map from `static`'s unit vectors to `teacher`'s, fitted on all but the last HELD_OUT_SHARE
    of `texts` to measure it, then on all of them."""
    import numpy as np

    source = static.encode(texts, normalize=True).astype(np.float64)
    target = np.asarray(teacher.encode(texts, normalize=True), dtype=np.float64)
    cut = len(texts) - max(1, int(len(texts) * HELD_OUT_SHARE))
    trial = ridge(source[:cut], target[:cut])
    mapped = source[cut:] @ trial
    mapped /= np.clip(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12, None)
    digest = texts_digest(texts)
    held_out = float(np.mean(np.sum(mapped * target[cut:], axis=1)))
    return Bridge(ridge(source, target), len(texts), origin, digest, held_out)


def texts_digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]


def ridge(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.linalg.solve(source.T @ source + RIDGE * np.eye(source.shape[1]), source.T @ target)


def bridged_model(static_model: Any, bridge: Bridge) -> Any:
    """`static_model` (a model2vec StaticModel) with every table row mapped into the teacher's space."""
    import numpy as np
    from model2vec import StaticModel

    table = np.asarray(static_model.embedding, dtype=np.float64) @ bridge.matrix
    return StaticModel(
        vectors=table.astype(static_model.embedding.dtype), tokenizer=static_model.tokenizer,
        config={**static_model.config, "hidden_dim": table.shape[1]}, normalize=True,
        base_model_name=static_model.base_model_name,
        language=static_model.language, weights=static_model.weights, token_mapping=static_model.token_mapping,
        max_length=static_model.max_length,
    )  # fmt: skip

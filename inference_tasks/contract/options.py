"""The request contract's options that search and retrieval callers set per task: prompts, truncation,
Matryoshka dimensions and the vector encoding. Checked here, the same way in the worker's main process
(micro-batch planning) and in the child that runs the task, so both agree on what a task encodes.

Producer-safe: stdlib only, nothing loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inference_tasks.config.catalogue import ModelEntry
from inference_tasks.validation import InvalidInput, quoted

# The prompt names a query and a document get in reranking and classification, where the model's
# catalogue entry has them (e5: "query: " / "passage: "); sentence-transformers' own conventions.
QUERY_PROMPT_NAMES = ("query",)
DOCUMENT_PROMPT_NAMES = ("passage", "document")


@dataclass(frozen=True)
class EncodeOptions:
    """How a task turns its texts into vectors: the prefix put before every text ("" for none), whether a
    text over the model's token limit is cut (True) or fails the task, unit length, the first
    `dimensions` components (None: all), and the encoding of the result."""

    prompt: str = ""
    truncate: bool = True
    normalize: bool = True
    dimensions: int | None = None
    encoding: str = "json"

    def prompted(self, texts: list[str]) -> list[str]:
        """The texts as the model reads them (sentence-transformers' encode(prompt=...) prepends too)."""
        return [self.prompt + text for text in texts] if self.prompt else texts


def resolve_prompt(task: str, entry: ModelEntry, prompt_name: Any, prompt: Any) -> str:
    """The prefix for a request: a literal `prompt`, the entry's prompt named `prompt_name`, else the
    entry's default prompt, else none. InvalidInput names the argument and the allowed values."""
    if prompt_name is not None and prompt is not None:
        raise InvalidInput(f"{task}: give prompt_name or prompt, not both")
    if prompt is not None:
        if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidInput(f"{task}: prompt must be a string of at most {MAX_PROMPT_CHARS} characters (a prefix)")
        return prompt
    if prompt_name is not None:
        if not isinstance(prompt_name, str) or prompt_name not in entry.prompts:
            known = ", ".join(repr(name) for name in sorted(entry.prompts)) or "none (this model has no prompts)"
            raise InvalidInput(
                f"{task}: prompt_name must be one of the prompts of model {entry.alias!r}: {known}; "
                f"got {quoted(prompt_name)}"
            )
        return entry.prompts[prompt_name]
    return default_prompt(entry)


def default_prompt(entry: ModelEntry) -> str:
    """The entry's default prompt, or "" when it has none."""
    return entry.prompts.get(entry.default_prompt, "") if entry.default_prompt else ""


def named_prompt(entry: ModelEntry, names: tuple[str, ...]) -> str:
    """The first of `names` the entry has a prompt for, else its default prompt, else ""."""
    for name in names:
        if name in entry.prompts:
            return entry.prompts[name]
    return default_prompt(entry)


def query_prompt(entry: ModelEntry) -> str:
    """What a query (rerank) or a text to label (classify) is prefixed with."""
    return named_prompt(entry, QUERY_PROMPT_NAMES)


def document_prompt(entry: ModelEntry) -> str:
    """What a document to rerank is prefixed with."""
    return named_prompt(entry, DOCUMENT_PROMPT_NAMES)


# A prompt is an instruction or a short prefix, never a document.
MAX_PROMPT_CHARS = 1000


def check_dimensions(task: str, value: Any, dim: int | None = None) -> int | None:
    """None (every component) or a whole number from 1 to the model's dimension (`dim`, when known)."""
    if value is None:
        return None
    upper = f"the model's {dim} dimensions" if dim else "the model's dimension"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (dim and value > dim):
        raise InvalidInput(f"{task}: dimensions must be null or a whole number from 1 to {upper}, got {quoted(value)}")
    return value


def encode_options(task: str, entry: ModelEntry, request: Mapping[str, Any], dim: int | None = None) -> EncodeOptions:
    """The encode options of a parsed request (contract/spec.py: each argument already checked by its
    own rule): the prompt resolved against the served model's entry, dimensions against its `dim`."""
    return EncodeOptions(
        prompt=resolve_prompt(task, entry, request["prompt_name"], request["prompt"]),
        truncate=request.get("truncate", True),
        normalize=request["normalize"],
        dimensions=check_dimensions(task, request["dimensions"], dim),
        encoding=request["encoding"],
    )

"""Argument checks for every task: a bad request fails alone, with a message a person can act on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inference_tasks.config import Settings


class InvalidInput(ValueError):
    """The task's arguments are wrong; retrying the same message cannot succeed."""


def reject_unknown(task: str, unknown: Mapping[str, Any], accepted: Iterable[str]) -> None:
    """Fail on keyword arguments the task does not take (a typo must not be ignored)."""
    if unknown:
        names = ", ".join(sorted(repr(name) for name in unknown))
        raise InvalidInput(f"{task}: unknown argument(s) {names}; accepted: {', '.join(accepted)}")


def check_texts(task: str, texts: Any, settings: Settings) -> list[str]:
    """A non-empty list of non-blank strings within the batch and length limits."""
    if not isinstance(texts, list):
        raise InvalidInput(f"{task}: texts must be a list of strings, got {_kind(texts)}")
    if not texts:
        raise InvalidInput(f"{task}: texts is empty; send at least one text")
    if len(texts) > settings.max_batch_texts:
        raise InvalidInput(
            f"{task}: {len(texts)} texts is more than the limit of {settings.max_batch_texts} "
            "per task (INFERENCE_MAX_BATCH_TEXTS); split the batch"
        )
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput(f"{task}: texts[{index}] must be a string, got {_kind(text)}")
        if not text.strip():
            raise InvalidInput(f"{task}: texts[{index}] is empty or blank")
        if len(text) > settings.max_text_chars:
            raise InvalidInput(
                f"{task}: texts[{index}] has {len(text)} characters, more than the limit of "
                f"{settings.max_text_chars} (INFERENCE_MAX_TEXT_CHARS); texts are rejected, "
                "not truncated"
            )
    return texts


def check_labels(task: str, labels: Any, settings: Settings) -> list[str]:
    """At least two distinct, non-blank label strings within the limits."""
    if not isinstance(labels, list):
        raise InvalidInput(f"{task}: labels must be a list of strings, got {_kind(labels)}")
    if len(labels) < 2:
        raise InvalidInput(f"{task}: labels needs at least 2 labels to choose between, got {len(labels)}")
    if len(labels) > settings.max_labels:
        raise InvalidInput(
            f"{task}: {len(labels)} labels is more than the limit of {settings.max_labels} (INFERENCE_MAX_LABELS)"
        )
    seen: dict[str, int] = {}
    for index, label in enumerate(labels):
        if not isinstance(label, str):
            raise InvalidInput(f"{task}: labels[{index}] must be a string, got {_kind(label)}")
        if not label.strip():
            raise InvalidInput(f"{task}: labels[{index}] is empty or blank")
        if len(label) > settings.max_label_chars:
            raise InvalidInput(
                f"{task}: labels[{index}] has {len(label)} characters, more than the limit of "
                f"{settings.max_label_chars} (INFERENCE_MAX_LABEL_CHARS)"
            )
        key = label.strip()
        if key in seen:
            raise InvalidInput(f"{task}: labels[{index}] {label!r} duplicates labels[{seen[key]}]")
        seen[key] = index
    return labels


def check_flag(task: str, name: str, value: Any) -> bool:
    """A JSON boolean (1 or "yes" are refused: the wire contract says true/false)."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{task}: {name} must be true or false, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """How a JSON value looks to a producer in another language."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, bool | int | float) and not isinstance(value, bool):
        return f"a number ({value!r})"
    return names.get(type(value), type(value).__name__)

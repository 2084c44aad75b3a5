"""Argument checks for every task: a bad request fails alone, with a message a person can act on."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import model_queue
from inference_tasks.routing import (
    EMBED_ENCODINGS,
    ENCODING_ALIASES,
    INFERENCE_QUEUE,
    PRIORITY_SEPARATOR,
    TASK_ROUTES,
    TRAINING_QUEUE,
)

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
# How much of a caller's value an error message quotes: the message goes into the result, the reply
# job and the logs, so a 100,000-character argument must not come back whole.
QUOTE_CHARS = 80
# The most an InvalidInput message says, whatever it quotes (a backstop to QUOTE_CHARS).
MESSAGE_CHARS = 2000


class InvalidInput(ValueError):
    """The task's arguments are wrong; retrying the same message cannot succeed."""

    def __init__(self, message: str) -> None:
        if len(message) > MESSAGE_CHARS:
            message = f"{message[:MESSAGE_CHARS]}... ({len(message)} characters)"
        super().__init__(message)


def quoted(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`value` as an error message quotes it: its repr, cut after `limit` characters with its length said."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(shown)} characters as written"
    return f"{shown[:limit]}... ({size})"


def check_queue(task: str, queue: Any) -> None:
    """A training task (routed to the training queues) taken from an inference queue (`inference`,
    `inference.<model>`) fails naming its queue: an inference worker must not train (its children have
    one thread and serve requests). A team's own queue is not checked, nor a message that does not say
    its queue (routing key)."""
    base = TASK_ROUTES.get(task, {}).get("queue")
    if base != TRAINING_QUEUE or not isinstance(queue, str):
        return
    name = queue.split(PRIORITY_SEPARATOR, 1)[0]
    if name == INFERENCE_QUEUE or name.startswith(f"{INFERENCE_QUEUE}."):
        raise InvalidInput(
            f"{task}: runs on the training queues ({base!r}, or {base}.<model> for a catalogue model), "
            f"not on the inference queue {quoted(queue)}; send it there (producers route it by name)"
        )


def check_texts(
    task: str, texts: Any, settings: Settings, max_texts: int | None = None, limit_name: str = "MAX_BATCH_TEXTS",
    *, name: str = "texts", max_chars: int | None = None, chars_name: str = "MAX_TEXT_CHARS",
) -> list[str]:  # fmt: skip
    """A non-empty list of non-blank strings within the count limit (default: the batch limit) and the
    length limit (default: INFERENCE_MAX_TEXT_CHARS); `name`: the argument, as messages say it."""
    max_texts = settings.max_batch_texts if max_texts is None else max_texts
    if not isinstance(texts, list):
        raise InvalidInput(f"{task}: {name} must be a list of strings, got {_kind(texts)}")
    if not texts:
        raise InvalidInput(f"{task}: {name} is empty; send at least one text")
    if len(texts) > max_texts:
        raise InvalidInput(
            f"{task}: {len(texts)} {name} is more than the limit of {max_texts} per task (INFERENCE_{limit_name}); "
            "split the batch"
        )
    check_text_items(task, texts, settings, name=name, max_chars=max_chars, chars_name=chars_name)
    return texts


def check_text_items(
    task: str, texts: list[Any], settings: Settings, offset: int = 0, *, name: str = "texts",
    max_chars: int | None = None, chars_name: str = "MAX_TEXT_CHARS",
) -> None:  # fmt: skip
    """Every item a non-blank string within the length limit; indexes count from `offset`."""
    limit = settings.max_text_chars if max_chars is None else max_chars
    for position, text in enumerate(texts):
        index = offset + position
        if not isinstance(text, str):
            raise InvalidInput(f"{task}: {name}[{index}] must be a string, got {_kind(text)}")
        if not text.strip():
            raise InvalidInput(f"{task}: {name}[{index}] is empty or blank")
        if len(text) > limit:
            raise InvalidInput(
                f"{task}: {name}[{index}] has {len(text)} characters, more than the limit of "
                f"{limit} (INFERENCE_{chars_name}); texts are rejected, not truncated"
            )


def check_text(task: str, name: str, text: Any, settings: Settings) -> str:
    """One non-blank string within INFERENCE_MAX_TEXT_CHARS (a rerank query)."""
    if not isinstance(text, str):
        raise InvalidInput(f"{task}: {name} must be a string, got {_kind(text)}")
    if not text.strip():
        raise InvalidInput(f"{task}: {name} is empty or blank")
    if len(text) > settings.max_text_chars:
        raise InvalidInput(
            f"{task}: {name} has {len(text)} characters, more than the limit of {settings.max_text_chars} "
            "(INFERENCE_MAX_TEXT_CHARS)"
        )
    return text


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
            raise InvalidInput(f"{task}: labels[{index}] {quoted(label)} duplicates labels[{seen[key]}]")
        seen[key] = index
    return labels


def check_name(task: str, name: Any) -> str:
    """A classifier name: letters, digits, '.', '_' or '-', 1 to 100 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            f"{task}: name must be 1-100 letters, digits, '.', '_' or '-', got {quoted(name)}"
            if isinstance(name, str)
            else f"{task}: name must be a string, got {_kind(name)}"
        )
    return name


def check_training_labels(task: str, labels: Any, count: int, settings: Settings) -> list[str]:
    """One non-blank label string per text, at least two distinct, each with enough examples."""
    if not isinstance(labels, list):
        raise InvalidInput(f"{task}: labels must be a list of strings (one per text), got {_kind(labels)}")
    if len(labels) != count:
        raise InvalidInput(f"{task}: {count} texts but {len(labels)} labels; give exactly one label per text")
    for index, label in enumerate(labels):
        if not isinstance(label, str) or not label.strip():
            raise InvalidInput(f"{task}: labels[{index}] must be a non-blank string, got {quoted(label)}")
        if len(label) > settings.max_label_chars:
            raise InvalidInput(f"{task}: labels[{index}] is longer than {settings.max_label_chars} characters")
    counts = Counter(labels)
    if len(counts) < 2:
        raise InvalidInput(f"{task}: labels has {len(counts)} distinct label(s); a classifier needs at least 2")
    if len(counts) > settings.max_labels:
        raise InvalidInput(f"{task}: {len(counts)} distinct labels is more than the limit of {settings.max_labels}")
    scarce = sorted(label for label, n in counts.items() if n < settings.min_examples_per_label)
    if scarce:
        raise InvalidInput(
            f"{task}: label(s) {', '.join(repr(label) for label in scarce)} have fewer than "
            f"{settings.min_examples_per_label} examples (INFERENCE_MIN_EXAMPLES_PER_LABEL)"
        )
    return labels


def check_fraction(task: str, name: str, value: Any, low: float, high: float) -> float:
    """A number strictly between `low` and `high`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low < value < high:
        raise InvalidInput(f"{task}: {name} must be a number between {low} and {high}, got {quoted(value)}")
    return float(value)


def check_weight(task: str, name: str, value: Any) -> float:
    """A finite number of at least 0 (a sparse weight's floor)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise InvalidInput(f"{task}: {name} must be a number of at least 0, got {quoted(value)}")
    return float(value)


def check_count(task: str, name: str, value: Any, low: int, high: int) -> int:
    """An integer from `low` to `high`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{task}: {name} must be an integer from {low} to {high}, got {quoted(value)}")
    return value


def check_flag(task: str, name: str, value: Any) -> bool:
    """A JSON boolean (1 or "yes" are refused: the wire contract says true/false)."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{task}: {name} must be true or false, got {_kind(value)}")
    return value


def check_choice(task: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of `choices`, exactly (no case folding: the wire contract spells them)."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(choice) for choice in choices)
        shown = quoted(value) if isinstance(value, str) else _kind(value)
        raise InvalidInput(f"{task}: {name} must be one of {allowed}, got {shown}")
    return value


def check_encoding(task: str, value: Any, choices: tuple[str, ...] = EMBED_ENCODINGS) -> str:
    """A vector encoding of `choices` (routing.EMBED_ENCODINGS) by its one name; an old alias maps to that name."""
    if isinstance(value, str) and value in ENCODING_ALIASES:
        return ENCODING_ALIASES[value]
    return check_choice(task, "encoding", value, choices)


def _kind(value: Any) -> str:
    """How a JSON value looks to a producer in another language."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, bool | int | float) and not isinstance(value, bool):
        return f"a number ({quoted(value)})"
    return names.get(type(value), type(value).__name__)


def check_model(task: str, model: Any, settings: Settings) -> str:
    """The alias this worker serves, when `model` (an alias, or None: the model of the queue the task
    came from) asks for it; else InvalidInput naming the queue that serves the one asked for, or,
    for an alias no catalogue entry has, the known ones. A task is never answered by another model."""
    catalogue, served = settings.models
    if model is None or model == served.alias:
        return served.alias
    if not isinstance(model, str):
        raise InvalidInput(f"{task}: model must be a model alias (a string), got {_kind(model)}")
    if model not in catalogue.models:
        raise InvalidInput(
            f"{task}: unknown model {quoted(model)}; known models: {', '.join(sorted(catalogue.models))}"
        )
    base = TASK_ROUTES.get(task, {}).get("queue", INFERENCE_QUEUE)
    raise InvalidInput(
        f"{task}: this worker serves model {served.alias!r}; model {model!r} is served on queue "
        f"{model_queue(model, base)!r} (send the task there: producers route by the model argument)"
    )

"""The rules task arguments follow, each a `Rule`: what the docs say it allows and the check the worker
runs (validation.py's checks, whose messages name the argument and what is allowed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inference_tasks.contract.options import MAX_PROMPT_CHARS
from inference_tasks.contract.spec import Rule
from inference_tasks.validation import (
    check_count,
    check_encoding,
    check_flag,
    check_fraction,
    check_labels,
    check_model,
    check_name,
    check_text,
    check_texts,
    check_weight,
)

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# The largest whole number a count argument takes where nothing smaller bounds it (a signed 32-bit int,
# what every client language holds).
MOST_COUNT = 2**31


def optional(rule: Rule) -> Rule:
    """`rule`, or null."""
    check = rule.check

    def null_or(task: str, name: str, value: Any, settings: Settings) -> Any:
        return None if value is None or check is None else check(task, name, value, settings)

    return Rule(f"null, or {rule.allowed}", null_or)


def flag() -> Rule:
    return Rule("true or false", lambda task, name, value, _: check_flag(task, name, value))


def count(low: int, high: int = MOST_COUNT) -> Rule:
    """A whole number from `low` to `high`."""
    return Rule(
        f"a whole number from {low} to {high}", lambda task, name, value, _: check_count(task, name, value, low, high)
    )


def weight() -> Rule:
    return Rule("a number of at least 0", lambda task, name, value, _: check_weight(task, name, value))


def fraction(low: float, high: float) -> Rule:
    return Rule(
        f"a number between {low} and {high}",
        lambda task, name, value, _: check_fraction(task, name, value, low, high),
    )


def encoding(choices: tuple[str, ...]) -> Rule:
    said = ", ".join(f'"{choice}"' for choice in choices)
    return Rule(f"one of {said}", lambda task, _, value, __: check_encoding(task, value, choices))


def model() -> Rule:
    """A catalogue alias this worker serves (null: the model of the queue the task came from)."""
    return Rule(
        "null, or the alias of the model whose queue the task is sent to",
        lambda task, _, value, settings: check_model(task, value, settings),
    )


# The per-task text limit's setting; a catalogue entry's max_batch_texts replaces it for its model.
TASK_TEXTS = "max_batch_texts"


def texts(count_limit: str = TASK_TEXTS, chars_limit: str = "max_text_chars") -> Rule:
    """A list of 1 to settings.<count_limit> non-blank strings of at most settings.<chars_limit> characters;
    the per-task limit (TASK_TEXTS) is the served model's (Settings.task_max_texts)."""
    count_name, chars_name = count_limit.upper(), chars_limit.upper()
    said = f"INFERENCE_{count_name}" + (" (or the model's max_batch_texts)" if count_limit == TASK_TEXTS else "")

    def check(task: str, name: str, value: Any, settings: Settings) -> list[str]:
        limit, limit_name = getattr(settings, count_limit), count_name
        if count_limit == TASK_TEXTS and settings.served_model.max_batch_texts:
            limit, limit_name = settings.task_max_texts, f"{count_name}, raised by the model's max_batch_texts"
        return check_texts(
            task, value, settings, limit, limit_name, name=name, max_chars=getattr(settings, chars_limit),
            chars_name=chars_name,
        )  # fmt: skip

    return Rule(f"1 to {said} non-blank strings of at most INFERENCE_{chars_name} characters", check)


def text() -> Rule:
    return Rule(
        "a non-blank string of at most INFERENCE_MAX_TEXT_CHARS characters",
        lambda task, name, value, settings: check_text(task, name, value, settings),
    )


def labels() -> Rule:
    return Rule(
        "2 to INFERENCE_MAX_LABELS distinct non-blank strings of at most INFERENCE_MAX_LABEL_CHARS characters",
        lambda task, _, value, settings: check_labels(task, value, settings),
    )


def name() -> Rule:
    return Rule("1 to 100 letters, digits, '.', '_' or '-'", lambda task, _, value, __: check_name(task, value))


def at_execution(allowed: str) -> Rule:
    """A rule that needs the loaded model or another argument: checked where the task executes."""
    return Rule(allowed)


def dimensions() -> Rule:
    """Checked against the loaded model's dimension (its message says the number)."""
    return at_execution("null, or a whole number from 1 to the model's dimension")


def prompt_name() -> Rule:
    """Checked with `prompt` against the served model's catalogue entry (contract/options.resolve_prompt)."""
    return at_execution("null, or the name of one of the model's catalogue prompts (not with prompt)")


def prompt() -> Rule:
    return at_execution(
        f"null, or a string of at most {MAX_PROMPT_CHARS} characters put before every text (not with prompt_name)"
    )

"""The bounds screening puts on a valid message: size, nesting, value counts, task names, scheduling.

Each bound is a setting (docs/configuration.md); each refusal names the variable that sets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from inference_tasks.broker.json_shape import depth_of


@dataclass(frozen=True)
class ScreeningLimits:
    """What screening enforces; each bound is a setting (docs/configuration.md names the variables)."""

    max_bytes: int
    max_depth: int
    max_argument_depth: int
    max_items: int
    max_eta_s: float
    # Exact task names producers may send, and name prefixes (from "myapp.*" in INFERENCE_EXTRA_TASKS).
    task_names: frozenset[str]
    task_prefixes: tuple[str, ...] = ()

    def accepts_task(self, name: str) -> bool:
        return name in self.task_names or name.startswith(self.task_prefixes)

    def described_tasks(self) -> str:
        return ", ".join([*sorted(self.task_names), *(f"{prefix}*" for prefix in self.task_prefixes)])


# The transport options screening reads (app.broker_transport_options derives them from the settings;
# the channel holds them as attributes: broker/admission.py).
LIMIT_OPTIONS = (
    "max_message_bytes", "max_nesting_depth", "max_argument_depth", "max_message_items", "max_eta_s",
    "accepted_tasks",
)  # fmt: skip


def limits_from_options(options: Mapping[str, Any]) -> ScreeningLimits:
    """The limits a worker screens with, from its transport options (LIMIT_OPTIONS): the one way they
    are built, by the channel and by the tests and benchmarks that check them."""
    names, prefixes = task_name_patterns(options["accepted_tasks"])
    return ScreeningLimits(
        max_bytes=options["max_message_bytes"],
        max_depth=options["max_nesting_depth"],
        max_argument_depth=options["max_argument_depth"],
        max_items=options["max_message_items"],
        max_eta_s=options["max_eta_s"],
        task_names=names,
        task_prefixes=prefixes,
    )


def task_name_patterns(names: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Split names and "prefix.*" patterns into exact names and prefixes (ScreeningLimits' two fields)."""
    exact = {name for name in names if not name.endswith(".*")}
    prefixes = tuple(sorted(name[:-1] for name in names if name.endswith(".*")))
    return frozenset(exact), prefixes


def with_max_bytes(limits: ScreeningLimits, max_bytes: int) -> ScreeningLimits:
    return replace(limits, max_bytes=max_bytes)


def items_problem(what: str, items: int, limits: ScreeningLimits) -> str:
    return (
        f"{what} holds {items} JSON values (array elements and object members), over the limit of "
        f"{limits.max_items} (INFERENCE_MAX_MESSAGE_ITEMS)"
    )


def depth_problem(what: str, depth: int | None, limits: ScreeningLimits) -> str:
    nested = f"nested {depth} levels deep" if depth is not None else "nested too deep to measure"
    return f"{what} is {nested}, over the limit of {limits.max_depth} (INFERENCE_MAX_NESTING_DEPTH)"


def argument_depth_problem(body: list[Any], body_depth: int, limits: ScreeningLimits) -> str | None:
    """Each argument's own nesting, within INFERENCE_MAX_ARGUMENT_DEPTH.

    An argument sits two levels inside the body ([args, kwargs, embed]), so a body no deeper than
    the limit plus two needs no walk (the common case: one cheap comparison).
    """
    if body_depth <= limits.max_argument_depth + 2:
        return None
    args, kwargs, _ = body
    named = [(f"args[{index}]", value) for index, value in enumerate(args)]
    named += [(f"kwargs[{key!r}]", value) for key, value in kwargs.items()]
    for name, value in named:
        depth = depth_of(value)
        if depth > limits.max_argument_depth:
            return (
                f"{name} is nested {depth} levels deep, over the limit of {limits.max_argument_depth} "
                "(INFERENCE_MAX_ARGUMENT_DEPTH)"
            )
    return None


def schedule_problem(headers: dict[str, Any], limits: ScreeningLimits, now: datetime | None = None) -> str | None:
    """An ETA (countdown) at most INFERENCE_MAX_ETA_S ahead: a worker holds an ETA task in memory
    (and renews its lease) until it is due, so an unbounded one could park tasks there for ever."""
    eta = headers.get("eta")
    if not isinstance(eta, str):
        return None  # absent (a type error is refused by the protocol checks, which run first)
    due = datetime.fromisoformat(eta)
    if due.tzinfo is None:
        due = due.replace(tzinfo=UTC)  # Celery reads a naive ETA as UTC (enable_utc, our default)
    ahead = (due - (now or datetime.now(UTC))).total_seconds()
    if ahead > limits.max_eta_s:
        return (
            f"headers.eta {eta} is {ahead:.0f} s ahead, beyond the scheduling horizon of {limits.max_eta_s:.0f} s "
            "(INFERENCE_MAX_ETA_S); schedule it later from your own scheduler"
        )
    return None


def within_depth(value: Any, limit: int) -> bool:
    return depth_of(value) <= limit

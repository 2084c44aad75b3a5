"""A task's arguments as data: each one's name, type, default, whether it may come by position, its
rule and its doc line; binding a call's args and kwargs to names; parsing them into checked values."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inference_tasks.validation import InvalidInput, quoted

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# A rule's check: (task, argument name, value, settings) -> the checked value; InvalidInput names the
# argument and what is allowed.
Check = Callable[[str, str, Any, "Settings"], Any]


@dataclass(frozen=True)
class Rule:
    """What an argument allows, said (`allowed`, in the docs) and checked (`check`). A rule whose check
    is None is checked where the task executes, because it needs the loaded model or another argument
    (`allowed` says which); the spec still names, places and defaults it."""

    allowed: str
    check: Check | None = None


@dataclass(frozen=True)
class Argument:
    """One argument of a task. `kind`: its type as JSON says it ("[str]", "bool", "int | null", ...);
    `positional`: it may also come by position (in spec order), else by keyword only."""

    name: str
    kind: str
    rule: Rule
    doc: str
    default: Any = None
    required: bool = False
    positional: bool = True


@dataclass(frozen=True)
class TaskSpec:
    """Every argument of one task, in order (those that may come by position first)."""

    task: str
    arguments: tuple[Argument, ...]

    def __post_init__(self) -> None:
        kinds = [argument.positional for argument in self.arguments]
        if kinds != sorted(kinds, reverse=True):
            raise ValueError(f"{self.task}: arguments that may come by position must come first")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(argument.name for argument in self.arguments)

    @property
    def positional(self) -> tuple[str, ...]:
        return tuple(argument.name for argument in self.arguments if argument.positional)

    def takes(self) -> str:
        """What the task takes, as its error messages say it."""
        keyword = [argument.name for argument in self.arguments if not argument.positional]
        said = [f"{', '.join(self.positional)} (by position or keyword)"] if self.positional else []
        said += [f"{', '.join(keyword)} (by keyword only)"] if keyword else []
        return " and ".join(said) or "no arguments"

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Each argument's value by name, defaults filled in. InvalidInput for too many positional
        arguments, one given both ways, or a keyword the task does not take (a typo is never ignored)."""
        if len(args) > len(self.positional):
            raise InvalidInput(f"{self.task}: too many positional arguments; it takes {self.takes()}")
        given = dict(zip(self.positional, args, strict=False))
        if twice := sorted(set(given) & set(kwargs)):
            raise InvalidInput(f"{self.task}: multiple values for argument {twice[0]!r}; it takes {self.takes()}")
        if unknown := sorted(set(kwargs) - set(self.names)):
            names = ", ".join(quoted(name) for name in unknown)
            raise InvalidInput(f"{self.task}: unknown argument(s) {names}; accepted: {', '.join(self.names)}")
        given |= kwargs
        return {argument.name: given.get(argument.name, argument.default) for argument in self.arguments}

    def parse(self, args: Sequence[Any], kwargs: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
        """The call bound to names, each value put through its argument's rule, in spec order."""
        values = self.bind(args, kwargs)
        for argument in self.arguments:
            if argument.rule.check is not None:
                values[argument.name] = argument.rule.check(self.task, argument.name, values[argument.name], settings)
        return values

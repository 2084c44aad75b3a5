"""The order configurations run in: rotated by level and reversed every other round, so no
configuration always runs first or last while the shared machine's speed drifts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def rotated(items: Sequence[Item], shift: int) -> list[Item]:
    shift %= len(items)
    return [*items[shift:], *items[:shift]]


def alternated(configs: Sequence[Item], rounds: int, shift: int = 0) -> Iterator[tuple[int, Item]]:
    """(round, config) for `rounds` rounds: each round rotated by `shift + round`, every other one reversed."""
    for round_index in range(rounds):
        order = rotated(configs, shift + round_index)
        for config in order if round_index % 2 == 0 else order[::-1]:
            yield round_index, config

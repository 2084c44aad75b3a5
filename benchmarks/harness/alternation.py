"""The order configurations run in: rotated by one each round, and reversed in every other block of as
many rounds as there are configurations, so no configuration always runs first or last (and, of up
to three, none always right after the same one) while the shared machine's speed drifts.

Until 2026-12-06 every other round was reversed after the rotation: with two configurations the two
cancel, and the first always ran first (benchmarks/cache.py found it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def rotated(items: Sequence[Item], shift: int) -> list[Item]:
    shift %= len(items)
    return [*items[shift:], *items[:shift]]


def alternated(configs: Sequence[Item], rounds: int, shift: int = 0) -> Iterator[tuple[int, Item]]:
    """(round, config) for `rounds` rounds: each round rotated by `shift + round`, the rounds of every
    other block of len(configs) rounds reversed."""
    for round_index in range(rounds):
        order = rotated(configs, shift + round_index)
        for config in order if (round_index // len(configs)) % 2 == 0 else order[::-1]:
            yield round_index, config

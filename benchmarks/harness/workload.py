"""The texts every benchmark sends: the repo's labelled support tickets, sampled with a seed."""

from __future__ import annotations

import json
import random
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "data" / "support_tickets.jsonl"


def ticket_texts() -> list[str]:
    """Every ticket's text, in file order."""
    return [json.loads(line)["text"] for line in DATA.open(encoding="utf-8")]


def make_batches(count: int, size: int, seed: int) -> list[list[str]]:
    """`count` batches of `size` realistic sentences (support messages), the same for a given seed."""
    texts = ticket_texts()
    rng = random.Random(seed)
    return [rng.sample(texts, size) if size <= len(texts) else rng.choices(texts, k=size) for _ in range(count)]

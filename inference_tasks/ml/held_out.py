"""Texts for the export-time accuracy gate that are not the int8 calibration corpus: its words recombined
by a seeded generator into other texts, from one word to a few hundred, plus registers the corpus lacks
(numbers, code, other languages). The same texts on every host, so a gate's figure means the same."""

from __future__ import annotations

import random
from collections.abc import Sequence

from inference_tasks.worker.tasks.calibration import corpus_texts

OTHER_REGISTERS = (
    "Order 48213 shipped on 2026-11-30 via DHL, tracking JD014600003828.",
    "TypeError: cannot read properties of undefined (reading 'id')",
    "SELECT count(*) FROM invoices WHERE status = 'overdue';",
    "Bitte senden Sie mir die Rechnung erneut.",
    "配送状況を確認したいです。",
    "Можно ли изменить адрес доставки?",
)


def held_out_texts(count: int = 96, seed: int = 2026) -> list[str]:
    """`count` texts recombined from the calibration corpus's words (see recombined)."""
    return recombined([word for text in corpus_texts() for word in text.split()], OTHER_REGISTERS, count, seed)


def recombined(words: Sequence[str], registers: Sequence[str], count: int, seed: int) -> list[str]:
    """`count` texts from `words` and `registers`, a fifth each: 1-6 words, 15-40 words, 150-320 words,
    a register plus words, a number and a register."""
    rng = random.Random(seed)
    texts = []
    for index in range(count):
        kind = index % 5
        if kind == 0:
            texts.append(" ".join(rng.choices(words, k=rng.randint(1, 6))))
        elif kind == 1:
            texts.append(" ".join(rng.choices(words, k=rng.randint(15, 40))))
        elif kind == 2:
            texts.append(" ".join(rng.choices(words, k=rng.randint(150, 320))))
        elif kind == 3:
            texts.append(f"{rng.choice(registers)} {' '.join(rng.choices(words, k=rng.randint(3, 12)))}")
        else:
            texts.append(f"{rng.randint(1, 99999)} {rng.choice(registers)} #{rng.randint(100, 999)}")
    return texts


def sentences(count: int, seed: int = 7) -> list[str]:
    """`count` sentences of 8-24 words: what a 64-text request and a one-sentence task are timed on."""
    rng = random.Random(seed)
    words = [word for text in corpus_texts() for word in text.split()]
    return [" ".join(rng.choices(words, k=rng.randint(8, 24))) for _ in range(count)]

"""Texts for the export-time accuracy gate that are not the int8 calibration corpus: its words recombined
by a seeded generator into other texts, from one word to a few hundred, plus registers the corpus lacks
(numbers, code, other languages) and long runs of one repeated token. The same texts on every host, so a
gate's figure means the same."""

from __future__ import annotations

import random
from collections.abc import Sequence

from inference_tasks.ml.corpus import corpus_texts

OTHER_REGISTERS = (
    "Order 48213 shipped on 2026-11-30 via DHL, tracking JD014600003828.",
    "TypeError: cannot read properties of undefined (reading 'id')",
    "SELECT count(*) FROM invoices WHERE status = 'overdue';",
    "Bitte senden Sie mir die Rechnung erneut.",
    "配送状況を確認したいです。",
    "Можно ли изменить адрес доставки?",
)

# Long runs of one repeated token (spam, filler, a stuck key): a quantized model's activations on them
# lie outside what ordinary text calibrates, and int8 lost most on them (docs/benchmarks-log.md, "int8
# recipes") before the gate held them. None of these words is among the int8 export's own
# repetitive calibration texts (int8_recipe.REPEATED_TOKEN_CALIBRATION), so the gate sees new ones.
REPEATED_TOKENS = (
    "x " * 1500, "hello " * 300, "refund " * 100, "the " * 300, "." * 500, "spam " * 250, "lol " * 200,
    "ok ok ok ok ok ok ok ok", "a " * 400, "please " * 200, "- " * 300, "0 " * 500,
)  # fmt: skip
# Other runs of repeated tokens, neither calibrated on nor in the gate: what the int8 recipes' benchmark
# and the int8 export's long test check a recipe on, so one chosen on the gate's texts meets others.
UNSEEN_REPEATED_TOKENS = (
    "shipping " * 120, "q" * 700, "no " * 250, "? " * 200, "thanks thanks " * 80, "1234 " * 150,
    "😀 " * 100, "Lorem ipsum " * 90, "test " * 45, "abc abc abc abc",
)  # fmt: skip


def held_out_texts() -> list[str]:
    """The gate's texts: 96 recombined from the calibration corpus's words, then REPEATED_TOKENS."""
    return recombined_corpus_texts(96, seed=2026) + list(REPEATED_TOKENS)


def recombined_corpus_texts(count: int, seed: int) -> list[str]:
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

"""Varied texts for accuracy gates, none of them in the calibration corpus: made deterministically from
the support tickets' words and a few other registers (numbers, code, mixed languages), from one word
to a few hundred."""

from __future__ import annotations

import json
import random
from pathlib import Path

TICKETS = Path(__file__).resolve().parents[2] / "data" / "support_tickets.jsonl"
OTHER = [
    "Order 48213 shipped on 2026-11-30 via DHL, tracking JD014600003828.",
    "TypeError: cannot read properties of undefined (reading 'id')",
    "SELECT count(*) FROM invoices WHERE status = 'overdue';",
    "Bitte senden Sie mir die Rechnung erneut.",
    "La application se ferme quand je clique sur exporter.",
    "配送状況を確認したいです。",
    "주문 번호를 잊어버렸어요.",
    "Можно ли изменить адрес доставки?",
    "The committee approved the budget after a long debate.",
    "Rain is expected over the weekend in the northern hills.",
]


def varied_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [word for line in TICKETS.read_text().splitlines() for word in json.loads(line)["text"].split()]
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
            texts.append(f"{rng.choice(OTHER)} {' '.join(rng.choices(words, k=rng.randint(3, 12)))}")
        else:
            texts.append(f"{rng.randint(1, 99999)} {rng.choice(OTHER)} #{rng.randint(100, 999)}")
    return texts

"""Varied texts for accuracy gates, none of them in the calibration corpus: made deterministically from
the support tickets' words and a few other registers (numbers, code, mixed languages), from one word
to a few hundred."""

from __future__ import annotations

import json
from pathlib import Path

from inference_tasks.worker.runtimes.held_out import recombined

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
    words = [word for line in TICKETS.read_text().splitlines() for word in json.loads(line)["text"].split()]
    return recombined(words, OTHER, count, seed)

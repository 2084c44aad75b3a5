"""The calibration corpus shipped with the package (calibration_texts.jsonl, beside this module: the
support tickets, short, odd, multilingual and long texts). Read by the int8/uint8 encodings' ranges
(worker/tasks/calibration.py), the int8 export's calibration (worker/runtimes/openvino/export.py) and the export gate's
held-out texts (worker/runtimes/held_out.py), which recombine its words."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

CORPUS = "calibration_texts.jsonl"


def corpus_texts() -> list[str]:
    """The calibration corpus, in its fixed order."""
    text = (resources.files("inference_tasks.ml") / CORPUS).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def corpus_digest() -> str:
    return hashlib.sha256((resources.files("inference_tasks.ml") / CORPUS).read_bytes()).hexdigest()[:12]

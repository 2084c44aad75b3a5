"""What `export-model --backend auto` measured, per host CPU, and the route a worker reads from it: which
runtime and precision serves a forward pass of how many texts. No runtime is imported here.

One record per CPU kind (its model name and bf16/int8 units), so a model cache shared by unlike hosts
(a network volume, an image built elsewhere) holds one measurement for each and every host serves its
own winner. Written by renaming, so a worker never reads half a record.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_tasks.worker.runtimes.export_files import model_export_path

RUNTIME = "auto"
# Texts per forward pass measured: one sentence (a lone request), a micro-batch, a bulk task's pass.
SIZES = (1, 8, 64)
RECORD_PREFIX = "runtime-choice-"


@dataclass(frozen=True)
class Lane:
    """Forward passes of at most `up_to` texts (None: any number) run on `candidate`."""

    up_to: int | None
    candidate: str


def candidate_name(runtime: str, precision: str) -> str:
    return f"{runtime} {precision}"


def split_candidate(name: str) -> tuple[str, str]:
    runtime, _, precision = name.partition(" ")
    return runtime, precision


def record_dir(model: str, source: Path, cache: Path) -> Path:
    return model_export_path(RUNTIME, model, source, cache)


def cpu_key(cpu: dict[str, Any]) -> str:
    """A short, stable name for a CPU kind (model name and deciding units)."""
    return hashlib.sha256(json.dumps(cpu, sort_keys=True).encode()).hexdigest()[:10]


def record_path(directory: Path, cpu: dict[str, Any]) -> Path:
    return directory / f"{RECORD_PREFIX}{cpu_key(cpu)}.json"


def read_record(directory: Path, cpu: dict[str, Any]) -> dict[str, Any] | None:
    path = record_path(directory, cpu)
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(directory: Path, record: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = record_path(directory, record["cpu"])
    staging = path.with_name(f"{path.name}.tmp")
    staging.write_text(json.dumps(record, indent=2) + "\n")
    staging.replace(path)
    return path


def lanes_of(winners: dict[str, str]) -> list[Lane]:
    """The route from the winner at each measured size: a pass goes to the winner of the nearest measured
    size (nearest on a log scale: the boundary between 8 and 64 texts is 22); neighbours with the
    same winner merge."""
    sizes = sorted(int(size) for size in winners)
    lanes: list[Lane] = []
    for index, size in enumerate(sizes):
        up_to = math.isqrt(size * sizes[index + 1]) if index + 1 < len(sizes) else None
        winner = winners[str(size)]
        if lanes and lanes[-1].candidate == winner:
            lanes[-1] = Lane(up_to, winner)
        else:
            lanes.append(Lane(up_to, winner))
    return lanes


def describe(lanes: list[Lane]) -> str:
    """ "ctranslate2 int8 (1-2 texts), openvino bf16 (3+ texts)", or one candidate alone."""
    if len(lanes) == 1:
        return lanes[0].candidate
    parts, low = [], 1
    for lane in lanes:
        span = f"{low}+" if lane.up_to is None else (f"{low}" if lane.up_to == low else f"{low}-{lane.up_to}")
        parts.append(f"{lane.candidate} ({span} texts)")
        low = (lane.up_to or 0) + 1
    return ", ".join(parts)


def lane_for(lanes: list[Lane], texts: int) -> Lane:
    return next((lane for lane in lanes if lane.up_to is None or texts <= lane.up_to), lanes[-1])

"""`export-model --backend openvino` (precision auto): time every precision this CPU can run, gate each
against torch, and record the fastest that passes beside the export (precision_choice.py).

Each candidate (f32; bf16 where the CPU has bf16 units; the NNCF int8 export) is compiled with one
inference thread, as a worker's child runs it, and timed on 64-text batches and on single sentences,
the candidates alternated round by round so a drift of the host's speed hits them alike. A candidate
whose vectors fall below GATE_MIN_COSINE to torch's on held-out texts cannot win. Runs in the
export-model process (a command, not a worker: nothing forks after its forward passes).
"""

from __future__ import annotations

import statistics
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.config.defaults import DEFAULT_MEASURE_ROUNDS
from inference_tasks.worker.runtimes.accuracy_gate import GATE_MIN_COSINE, min_cosines
from inference_tasks.worker.runtimes.held_out import held_out_texts, sentences
from inference_tasks.worker.runtimes.openvino.precision_choice import has_bf16, host_cpu, write_record

if TYPE_CHECKING:
    from inference_tasks.config import Settings

BATCH_TEXTS = 64
SINGLES_PER_ROUND = 16


def candidates_for(cpu: dict[str, Any]) -> list[str]:
    return ["f32", *(["bf16"] if has_bf16(cpu) else []), "int8"]


def measure_and_record(
    model: str, source: Path, base: Path, int8: Path, rounds: int = DEFAULT_MEASURE_ROUNDS
) -> dict[str, Any]:
    """Measure every candidate on this host, write the record beside `base`, and return it."""
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder

    cpu = host_cpu()
    names = candidates_for(cpu)
    encoders = {name: OpenVinoEncoder(model, int8 if name == "int8" else base, name) for name in names}
    for encoder in encoders.values():
        encoder.compile(1)
    cosines = min_cosines(source, encoders)
    batch_s, single_ms = timings(encoders, rounds)
    rows = {
        name: {
            "passed": cosines[name] >= GATE_MIN_COSINE,
            "min_cosine": round(cosines[name], 5),
            "batch_texts_per_s": round(BATCH_TEXTS / statistics.median(batch_s[name]), 1),
            "single_p50_ms": round(statistics.median(single_ms[name]), 2),
        }
        for name in names
    }
    passed = [name for name in names if rows[name]["passed"]]
    if not passed:
        raise RuntimeError(f"no precision passed the accuracy gate (min cosine >= {GATE_MIN_COSINE}): {rows}")
    record = {
        "winner": max(passed, key=lambda name: rows[name]["batch_texts_per_s"]),
        "cpu": cpu,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "openvino": metadata.version("openvino"),
        "gate": {"min_cosine": GATE_MIN_COSINE, "texts": len(held_out_texts()), "reference": "torch f32"},
        "timing": {"threads": 1, "batch_texts": BATCH_TEXTS, "rounds": rounds, "singles_per_round": SINGLES_PER_ROUND},
        "candidates": rows,
    }
    write_record(base, record)
    return record


def timings(encoders: dict[str, Any], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per 64-text batch and milliseconds per single sentence, candidates alternated each round."""
    names = list(encoders)
    batch, singles = sentences(BATCH_TEXTS), sentences(SINGLES_PER_ROUND, seed=8)
    batch_s: dict[str, list[float]] = {name: [] for name in names}
    single_ms: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        for name in names if round_index % 2 == 0 else reversed(names):
            started = time.perf_counter()
            encoders[name].encode(batch, normalize=True)
            batch_s[name].append(time.perf_counter() - started)
            for text in singles:
                started = time.perf_counter()
                encoders[name].encode([text], normalize=True)
                single_ms[name].append((time.perf_counter() - started) * 1000)
    return batch_s, single_ms


def measure_and_report(settings: Settings, base: Path, int8: Path, force: bool) -> None:
    """export-model's last step: time every candidate precision here and record the winner, unless a
    record exists (`--force`); print each candidate's figures."""
    import click

    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.precision_choice import read_record

    record = read_record(base)
    if record is None or force:
        model = settings.served_model.source
        record = measure_and_record(model, resolve_model_path(model), base, int8, settings.measure_rounds)
    else:
        click.echo(f"precision: already measured on {record['cpu']['model']} at {record['measured_at']} (--force)")
    for name, row in record["candidates"].items():
        gate = "passes" if row["passed"] else "FAILS"
        click.echo(
            f"  {name:>5}: {row['batch_texts_per_s']:8.1f} sentences/s (64-text batches), one sentence "
            f"{row['single_p50_ms']:.2f} ms p50, min cosine to torch {row['min_cosine']:.5f} ({gate} the gate)"
        )
    click.echo(f"precision: {record['winner']} is served by INFERENCE_OPENVINO_PRECISION=auto on this host "
               f"({record['cpu']['model']}, one thread per child)")  # fmt: skip

"""`export-model --backend auto`'s measurement: every runtime and precision exported for the served model
on this host, timed with one thread (as a worker's child runs) at each size of choice_record.SIZES,
gated against torch, and the fastest that passes at each size recorded.

Timed round by round with the candidates alternated, so a drift of the host's speed hits them alike.
Runs in the export-model process (a command: nothing forks after its forward passes).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from inference_tasks.config.defaults import DEFAULT_MEASURE_ROUNDS
from inference_tasks.worker.runtimes.accuracy_gate import GATE_MIN_COSINE, min_cosines
from inference_tasks.worker.runtimes.auto.choice_record import SIZES, candidate_name
from inference_tasks.worker.runtimes.held_out import held_out_texts, sentences

# Held-out texts the gate also reads one at a time: a lone text may take another path (static shapes).
ONE_BY_ONE = 48
# Single sentences timed per round (each its own call); larger sizes fill about the same texts.
SINGLES_PER_ROUND = 16


def candidate_encoders(model: str, source: Path, cache: Path, cpu: dict[str, Any]) -> dict[str, Any]:
    """Every candidate this host can run for `model`, loaded and compiled with one thread."""
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.registry import runtime_loader

    encoders: dict[str, Any] = {}
    torch_encoder = runtime_loader("torch").load_dense_encoder(model, "cpu", LoadOptions("torch", cache))
    encoders[candidate_name("torch", "f32")] = torch_encoder
    encoders |= openvino_candidates(model, source, cache, cpu)
    encoders |= ctranslate2_candidates(model, source, cache)
    for encoder in encoders.values():
        encoder.compile(1)
    return encoders


def openvino_candidates(model: str, source: Path, cache: Path, cpu: dict[str, Any]) -> dict[str, Any]:
    """f32, bf16 where the CPU has it, and int8 where its export exists and is this release's recipe."""
    from inference_tasks.worker.runtimes.openvino.export_paths import (
        export_path,
        int8_export_path,
        is_exported,
        quantized_by,
        runtime_missing,
    )
    from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe, recipe_digest
    from inference_tasks.worker.runtimes.openvino.measure import candidates_for

    base, int8 = export_path(model, source, cache), int8_export_path(model, source, cache)
    if runtime_missing() or not is_exported(base):
        return {}
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import SHAPE_BUCKETS, OpenVinoEncoder

    current_int8 = is_exported(int8) and quantized_by(int8) == recipe_digest(Int8Recipe())
    names = [name for name in candidates_for(cpu) if name != "int8" or current_int8]
    return {
        candidate_name("openvino", name): OpenVinoEncoder(model, int8 if name == "int8" else base, name, SHAPE_BUCKETS)
        for name in names
    }


def ctranslate2_candidates(model: str, source: Path, cache: Path) -> dict[str, Any]:
    from inference_tasks.worker.runtimes.ctranslate2.export_paths import (
        COMPUTE_TYPE,
        export_path,
        is_exported,
        runtime_missing,
    )

    path = export_path(model, source, cache)
    if runtime_missing() or not is_exported(path):
        return {}
    from inference_tasks.worker.runtimes.ctranslate2.ct2_encoder import Ct2Encoder

    return {candidate_name("ctranslate2", COMPUTE_TYPE): Ct2Encoder(model, path)}


def timings(encoders: dict[str, Any], rounds: int) -> dict[str, dict[int, list[float]]]:
    """Seconds per call of each size, per candidate, the candidates' order alternated each round."""
    names = list(encoders)
    calls = {size: [sentences(size, seed=size + index) for index in range(max(1, SINGLES_PER_ROUND // size))]
             for size in SIZES}  # fmt: skip
    seconds: dict[str, dict[int, list[float]]] = {name: {size: [] for size in SIZES} for name in names}
    for round_index in range(rounds):
        for name in names if round_index % 2 == 0 else reversed(names):
            for size in SIZES:
                for texts in calls[size]:
                    started = time.perf_counter()
                    encoders[name].encode(texts, normalize=True)
                    seconds[name][size].append(time.perf_counter() - started)
    return seconds


def measure(source: Path, encoders: dict[str, Any], rounds: int = DEFAULT_MEASURE_ROUNDS) -> dict[str, Any]:
    """Each candidate's gate and figures at every size, and the winner at each size."""
    for encoder in encoders.values():  # warm: first calls allocate
        encoder.encode(sentences(SIZES[-1], seed=3), normalize=True)
    cosines = min_cosines(source, encoders, one_by_one=ONE_BY_ONE)
    seconds = timings(encoders, rounds)
    rows: dict[str, dict[str, Any]] = {
        name: {
            "passed": cosines[name] >= GATE_MIN_COSINE,
            "min_cosine": round(cosines[name], 5),
            "sizes": {
                str(size): {
                    "texts_per_s": round(size / statistics.median(seconds[name][size]), 1),
                    "p50_ms": round(statistics.median(seconds[name][size]) * 1000, 2),
                }
                for size in SIZES
            },
        }
        for name in encoders
    }
    passed = [name for name in encoders if rows[name]["passed"]]
    if not passed:
        raise RuntimeError(f"no candidate passed the accuracy gate (min cosine >= {GATE_MIN_COSINE}): {rows}")
    winners = {str(size): max(passed, key=lambda name: rows[name]["sizes"][str(size)]["texts_per_s"]) for size in SIZES}
    return {
        "candidates": rows,
        "winners": winners,
        "gate": {
            "min_cosine": GATE_MIN_COSINE,
            "texts": len(held_out_texts()),
            "one_by_one": ONE_BY_ONE,
            "reference": "torch f32",
        },
        "timing": {"threads": 1, "sizes": list(SIZES), "rounds": rounds, "singles_per_round": SINGLES_PER_ROUND},
    }

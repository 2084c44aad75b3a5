"""From a recorded measurement to what a worker serves: the lanes' encoders, loaded but never run, or
torch with the reason it serves instead (no measurement, an export gone missing, a GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.auto.choice_record import Lane, describe, lanes_of, split_candidate

if TYPE_CHECKING:
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions


def served_lanes(record: dict[str, Any]) -> list[Lane]:
    return lanes_of(record["winners"])


def unusable(record: dict[str, Any], model: str, source: Path, cache: Path) -> str | None:
    """Why the record's route cannot be served here (a runtime no longer installed, an export gone), or None."""
    for lane in served_lanes(record):
        runtime, precision = split_candidate(lane.candidate)
        if (problem := export_problem(runtime, precision, model, source, cache)) is not None:
            return f"{lane.candidate}: {problem}"
    return None


def export_problem(runtime: str, precision: str, model: str, source: Path, cache: Path) -> str | None:
    if runtime == "openvino":
        from inference_tasks.worker.runtimes.openvino import export_paths as openvino

        path = openvino.served_export_path(model, source, cache, precision)
        return openvino.runtime_missing() or (None if openvino.is_exported(path) else f"no export at {path}")
    if runtime == "ctranslate2":
        from inference_tasks.worker.runtimes.ctranslate2 import export_paths as ct2

        path = ct2.export_path(model, source, cache)
        return ct2.runtime_missing() or (None if ct2.is_exported(path) else f"no export at {path}")
    return None


def lane_encoder(runtime: str, precision: str, model: str, options: LoadOptions) -> DenseEncoder:
    """One lane's encoder, on its runtime's own loader, in the measured precision (OpenVINO with its
    one-text static shapes, as measured)."""
    from dataclasses import replace

    from inference_tasks.worker.runtimes.openvino.openvino_encoder import SHAPE_BUCKETS
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    lane_options = replace(options, runtime=runtime, precision=precision, shape_buckets=SHAPE_BUCKETS)
    return load_dense_encoder(model, "cpu", lane_options)


def runtimes_of(record: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(split_candidate(lane.candidate)[0] for lane in served_lanes(record)))


def summary(record: dict[str, Any]) -> str:
    return describe(served_lanes(record))

"""`inference-tasks export-model --backend auto` (the default): export the served model for every CPU
runtime installed here, measure them all on this host (measure.py) and record the winner at each
request size (choice_record.py), which a worker with INFERENCE_BACKEND=auto serves.

What cannot be exported (a runtime not installed, an architecture its converter does not take) is
recorded with its reason and left out of the race; torch is always in it. The OpenVINO int8 export
stays an explicit step (`--backend openvino --precision int8`: ~30 s of calibration); once made, it
races too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.auto.choice_record import (
    SIZES,
    describe,
    lanes_of,
    read_record,
    record_dir,
    write_record,
)

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.export_files import Export


# The reference candidate, always in the race (choice_record.candidate_name("torch", "f32")).
TORCH = "torch f32"


def exporters() -> dict[str, tuple[Callable[[], str | None], Callable[[Settings], Export]]]:
    """Runtime -> (why it cannot run here, or None; its export)."""
    from inference_tasks.worker.runtimes.ctranslate2 import export_paths as ct2_paths
    from inference_tasks.worker.runtimes.ctranslate2.export import export_ctranslate2
    from inference_tasks.worker.runtimes.openvino import export_paths as openvino_paths
    from inference_tasks.worker.runtimes.openvino.export import export_openvino

    return {
        "openvino": (openvino_paths.runtime_missing, export_openvino),
        "ctranslate2": (ct2_paths.runtime_missing, export_ctranslate2),
    }


def export_auto(settings: Settings, force: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The served model's measured choice on this host: read if recorded (unless `force`), else every
    runtime's export made (each kept if present) and every candidate measured."""
    from inference_tasks.worker.host import threads
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu

    model, cache = settings.served_model.source, settings.model_cache_dir
    source, cpu = resolve_model_path(model), host_cpu()
    directory = record_dir(model, source, cache)
    if (record := read_record(directory, cpu)) is not None and not force:
        log(f"auto: already measured on {record['cpu']['model']} at {record['measured_at']} (--force)")
        return record
    threads.set_offline_env(os.environ)
    left_out: dict[str, str] = {}
    for runtime, (missing, export) in exporters().items():
        if problem := missing():
            left_out[runtime] = problem
            continue
        try:
            done = export(settings)
        except Exception as error:  # noqa: BLE001 - a runtime that cannot take this model leaves the race
            left_out[runtime] = f"{type(error).__name__}: {error}"
            continue
        verb = f"exported in {done.seconds:.1f} s" if done.created else "already exported"
        log(f"auto: {runtime} {verb}: {done.path}")
    if len(left_out) < len(exporters()):
        record = measured_record(settings, source, cpu, left_out)
    else:  # torch alone: a race of one has its winner already (~30 s of timing saved at a first start)
        log("auto: nothing but torch can run here; recorded without timing it")
        record = described(settings, cpu, {"candidates": {}, "winners": dict.fromkeys(map(str, SIZES), TORCH)},
                           left_out)  # fmt: skip
    write_record(directory, record)
    return record


def measured_record(settings: Settings, source: Any, cpu: dict[str, Any], left_out: dict[str, str]) -> dict[str, Any]:
    import torch

    from inference_tasks.worker.runtimes.auto.measure import candidate_encoders, measure

    torch.set_num_threads(1)
    encoders = candidate_encoders(settings.served_model.source, source, settings.model_cache_dir, cpu)
    return described(settings, cpu, measure(source, encoders, settings.measure_rounds), left_out)


def described(
    settings: Settings, cpu: dict[str, Any], measured: dict[str, Any], left_out: dict[str, str]
) -> dict[str, Any]:
    """A record: what was measured (or only torch's winning lanes), the route, what was left out and why."""
    return {
        "model": settings.served_model.source,
        "cpu": cpu,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "route": describe(lanes_of(measured["winners"])),
        **measured,
        "left_out": left_out,
        "versions": {name: version(name) for name in ("torch", "openvino", "ctranslate2")},
    }


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def report_lines(record: dict[str, Any]) -> list[str]:
    """What export-model prints: each candidate's figures, what was left out and why, the route."""
    lines = []
    for name, row in record["candidates"].items():
        figures = ", ".join(
            f"{size} text{'s' if size != '1' else ''} {cell['texts_per_s']:.0f}/s ({cell['p50_ms']:.2f} ms)"
            for size, cell in row["sizes"].items()
        )
        gate = "passes" if row["passed"] else "FAILS"
        lines.append(f"  {name:>16}: {figures}; min cosine to torch {row['min_cosine']:.4f} ({gate} the gate)")
    lines += [f"  {runtime:>16}: left out: {why}" for runtime, why in record["left_out"].items()]
    lines.append(f"auto: serves {record['route']} on this host ({record['cpu']['model']}, one thread per child)")
    return lines

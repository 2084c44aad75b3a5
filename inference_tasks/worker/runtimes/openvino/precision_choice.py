"""Which OpenVINO precision a worker serves: the one `export-model` measured fastest on this host, unless
INFERENCE_OPENVINO_PRECISION names one.

No precision wins everywhere: on a 2-core Intel Xeon with AMX, int8 ran at 0.86x bf16's sentences/s;
on an AMD EPYC with AVX512_BF16 and no AMX, at 1.25x (docs/benchmarks-log.md, "int8"). So `export-model
--backend openvino` times every candidate on the host that runs it and records the winner, with its
figures and the CPU it was measured on, beside the export (measure.py). A worker set to `auto`
serves that record; a host whose CPU differs from the record's still serves it, and `doctor` says to
measure again; so does an int8 export quantized by another release's recipe. Read here, in the
worker's main process, before anything is compiled.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Beside the full-precision export (openvino_model.export_path), written last by export-model.
CHOICE_FILE = "precision-choice.json"
AUTO = "auto"
INT8 = "int8"
# PrecisionChoice.how for an int8 export another release quantized (its recipe is not this one's).
STALE_EXPORT = "stale-export"
# The CPU features that decide which precision is fastest (bf16 and int8 matrix units).
DECIDING_FLAGS = ("avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile", "avx_vnni")
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class PrecisionChoice:
    """What a worker serves and why: `how` is measured, measured-elsewhere, explicit, default or
    stale-export (int8, quantized by another release's recipe)."""

    precision: str
    how: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def host_cpu(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """This host's CPU model name and the flags of DECIDING_FLAGS it has (empty where /proc says nothing)."""
    model, flags = "unknown", set[str]()
    text = cpuinfo.read_text(errors="replace") if cpuinfo.is_file() else ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "flags": [flag for flag in DECIDING_FLAGS if flag in flags]}


def has_bf16(cpu: dict[str, Any]) -> bool:
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu["flags"]))


def read_record(export: Path) -> dict[str, Any] | None:
    """The measurement export-model recorded beside `export`, or None."""
    path = export / CHOICE_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(export: Path, record: dict[str, Any]) -> Path:
    """Write `record` beside `export` (renamed into place: a worker never reads half a file)."""
    path = export / CHOICE_FILE
    staging = path.with_name(f"{path.name}.tmp")
    staging.write_text(json.dumps(record, indent=2) + "\n")
    staging.replace(path)
    return path


def choose_precision(setting: str, export: Path, cpu: dict[str, Any] | None = None) -> PrecisionChoice:
    """The precision to serve for INFERENCE_OPENVINO_PRECISION=`setting` with the full-precision export at
    `export`: an explicit setting as given; `auto` the recorded winner, else OpenVINO's default."""
    if setting != AUTO:
        return PrecisionChoice(setting, "explicit", f"INFERENCE_OPENVINO_PRECISION={setting}")
    record = read_record(export)
    if record is None:
        return PrecisionChoice(
            AUTO, "default", "no measurement recorded (export-model --precision auto): OpenVINO's default, "
            "bf16 where the CPU has it, else f32",
        )  # fmt: skip
    cpu = cpu or host_cpu()
    figures = ", ".join(
        f"{name} {row['batch_texts_per_s']:.0f}/s" for name, row in record["candidates"].items() if row["passed"]
    )
    measured = f"fastest of {figures} (64-text batches, one thread) on {record['cpu']['model']}"
    if record["cpu"] != cpu:
        return PrecisionChoice(
            record["winner"], "measured-elsewhere", f"{measured}, not this host's CPU ({cpu['model']}, "
            f"{' '.join(cpu['flags']) or 'no bf16/int8 units'}): run `inference-tasks export-model --backend "
            "openvino --force` here to measure again",
        )  # fmt: skip
    return PrecisionChoice(record["winner"], "measured", measured)


def served_precision(setting: str, model: str, source: Path, cache: Path) -> PrecisionChoice:
    """choose_precision for `model` (its files at `source`), whose export is under the model cache `cache`;
    an int8 export quantized by another recipe than this release's is served, but flagged."""
    from inference_tasks.worker.runtimes.openvino.export_paths import export_path, int8_export_path, is_exported

    choice = choose_precision(setting, export_path(model, source, cache))
    int8 = int8_export_path(model, source, cache)
    if choice.precision == INT8 and is_exported(int8):
        return flag_stale_int8(choice, int8)
    return choice


def flag_stale_int8(choice: PrecisionChoice, int8_export: Path) -> PrecisionChoice:
    """`choice` (int8), as `stale-export` when the export at `int8_export` was quantized by another recipe."""
    from inference_tasks.worker.runtimes.openvino.export_paths import quantized_by
    from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe, recipe_digest

    if quantized_by(int8_export) == recipe_digest(Int8Recipe()):
        return choice
    return PrecisionChoice(
        INT8, STALE_EXPORT, f"{choice.why}; but its int8 export ({int8_export}) was quantized by another release's "
        "recipe: run `inference-tasks export-model --backend openvino` here to quantize and measure again",
    )  # fmt: skip

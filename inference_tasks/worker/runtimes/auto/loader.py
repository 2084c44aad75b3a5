"""Loading a dense encoder on the auto runtime: the route this host measured for the served model (one
lane's encoder, or a RoutedEncoder over several), else torch with the reason why; never run here."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.model_files import resolve_model_path

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.capabilities import DenseEncoder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

logger = logging.getLogger(__name__)

# Before prepare() says which runtimes the route takes (imports(), below), only the tokenizer.
IMPORTS = ("tokenizers",)
FALLBACK = "torch"


def prepare(settings: Settings) -> None:
    """At the worker's start, in its main process: export and measure once if this host has no record."""
    from inference_tasks.worker.runtimes.auto.first_start import prepare as export_if_missing

    export_if_missing(settings)


def imports(source: str, options: LoadOptions) -> tuple[str, ...]:
    """What the worker's main process imports: each routed runtime's own IMPORTS (torch's when it falls back)."""
    from inference_tasks.worker.runtimes.auto.routes import runtimes_of
    from inference_tasks.worker.runtimes.registry import runtime_loader

    record, _ = recorded(source, options)
    names = runtimes_of(record) if record is not None else [FALLBACK]
    return tuple(dict.fromkeys(name for runtime in names for name in runtime_loader(runtime).IMPORTS))


def recorded(source: str, options: LoadOptions) -> tuple[dict[str, Any] | None, str]:
    """This host's usable record for `source`, or None and why not."""
    from inference_tasks.worker.runtimes.auto.choice_record import read_record, record_dir, record_path
    from inference_tasks.worker.runtimes.auto.first_start import failure_note
    from inference_tasks.worker.runtimes.auto.routes import unusable
    from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu

    if options.cache is None:
        return None, "no model cache directory (INFERENCE_MODEL_CACHE)"
    path, cpu = resolve_model_path(source), host_cpu()
    directory = record_dir(source, path, options.cache)
    record = read_record(directory, cpu)
    if record is None:
        note = failure_note(record_path(directory, cpu))
        why = note.read_text().strip() if note.is_file() else f"no measurement of this host's CPU ({cpu['model']})"
        return None, f"{why}: run `inference-tasks export-model` here"
    if (problem := unusable(record, source, path, options.cache)) is not None:
        return None, f"the measured route cannot be served ({problem}): run `inference-tasks export-model --force`"
    return record, ""


def load_dense_encoder(source: str, device: str, options: LoadOptions) -> DenseEncoder:
    from dataclasses import replace

    from inference_tasks.worker.runtimes.auto.choice_record import split_candidate
    from inference_tasks.worker.runtimes.auto.routed_encoder import RoutedEncoder
    from inference_tasks.worker.runtimes.auto.routes import lane_encoder, runtimes_of, served_lanes, summary
    from inference_tasks.worker.runtimes.registry import load_dense_encoder as load_on

    record, why = recorded(source, options)
    if record is not None and runtimes_of(record) == [FALLBACK] and (left_out := record.get("left_out")):
        record, why = None, "; ".join(f"{runtime}: {reason}" for runtime, reason in left_out.items())
    if record is None:
        encoder = load_on(source, device, replace(options, runtime=FALLBACK))
        choice = {"served": FALLBACK, "how": "fallback", "why": why}
        logger.warning("auto runtime: serving torch, nothing faster could be measured here: %s", why)
    else:
        lanes = [
            (lane, lane_encoder(*split_candidate(lane.candidate), source, options)) for lane in served_lanes(record)
        ]
        choice = {"served": summary(record), "how": "measured", "why": measured_why(record)}
        encoder = lanes[0][1] if len(lanes) == 1 else RoutedEncoder(source, lanes, choice)
    encoder.runtime_choice = choice  # type: ignore[attr-defined]
    return encoder


def measured_why(record: dict[str, Any]) -> str:
    winners = record["winners"]
    figures = "; ".join(
        f"{size} text{'s' if size != '1' else ''}: {name} "
        f"{record['candidates'][name]['sizes'][size]['texts_per_s']:.0f}/s" for size, name in winners.items()
    )  # fmt: skip
    left = f"; left out: {', '.join(record['left_out'])}" if record.get("left_out") else ""
    return f"fastest at each size on {record['cpu']['model']} at {record['measured_at']} ({figures}){left}"

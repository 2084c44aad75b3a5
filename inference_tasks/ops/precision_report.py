"""What `doctor` and the exporter say about the OpenVINO precision each worker serves, from the workers'
own replies (each worker compares the measurement with its own host's CPU:
worker/runtimes/openvino/precision_choice.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

MEASURE_AGAIN = (
    "run `inference-tasks export-model --backend openvino --force` on that host (with its INFERENCE_MODEL_CACHE) "
    "and restart its workers: the fastest precision depends on the CPU"
)
QUANTIZE_AGAIN = (
    "run `inference-tasks export-model --backend openvino` on that host (with its INFERENCE_MODEL_CACHE) and "
    "restart its workers: it quantizes int8 again with this release's recipe and measures again"
)
# The choices doctor fails on, and what fixes each.
FIXES = {"measured-elsewhere": MEASURE_AGAIN, "stale-export": QUANTIZE_AGAIN}


def choices_of(replies: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Worker -> its precision choice, for the workers that serve an OpenVINO model."""
    return {node: reply["precision_choice"] for node, reply in sorted(replies.items()) if reply.get("precision_choice")}


def precision_finding(replies: dict[str, Any]) -> tuple[bool, str, str] | None:
    """doctor's line (ok, detail, fix): fails when a worker serves a precision measured on another CPU or
    an int8 export of another release's recipe; None when no worker runs OpenVINO."""
    choices = choices_of(replies)
    if not choices:
        return None
    for how, fix in FIXES.items():
        flagged = {node: choice for node, choice in choices.items() if choice["how"] == how}
        if flagged:
            choice = next(iter(flagged.values()))
            return False, f"{', '.join(flagged)} serve {choice['precision']}, {choice['why']}", fix
    served = [f"{node}: {choice['precision']} ({choice['how']}: {choice['why']})" for node, choice in choices.items()]
    return True, "; ".join(served), ""


def precision_metric(replies: dict[str, Any]) -> Iterator[Any]:
    """inference_worker_precision_info: 1 per OpenVINO worker, labelled with what it serves and how chosen."""
    info = GaugeMetricFamily(
        "inference_worker_precision_info",
        "1 per OpenVINO worker: the precision it serves and how it was chosen (measured on this host, "
        "measured-elsewhere: on another CPU, explicit, default, stale-export: int8 of another release's recipe)",
        labels=["worker", "precision", "how"],
    )
    for node, choice in choices_of(replies).items():
        info.add_metric([node, choice["precision"], choice["how"]], 1)
    yield info

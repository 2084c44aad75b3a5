"""What `doctor` and the exporter say about the runtime each auto worker serves (INFERENCE_BACKEND=auto,
the default), from the workers' own replies (worker/runtimes/auto/loader.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

FIX_FALLBACK = (
    "on that host, with its INFERENCE_MODEL_CACHE: `inference-tasks export-model` (after `pip install "
    "'inference-tasks[openvino,ctranslate2]'` where the reason says one is missing), then restart its workers"
)


def choices_of(replies: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Worker -> its runtime choice, for the workers on the auto runtime."""
    return {node: reply["runtime_choice"] for node, reply in sorted(replies.items()) if reply.get("runtime_choice")}


def runtime_finding(replies: dict[str, Any]) -> tuple[bool, str, str] | None:
    """doctor's line (ok, detail, fix): fails when an auto worker serves torch because nothing faster could
    be measured (the reason is its own); None when no worker is on auto."""
    choices = choices_of(replies)
    if not choices:
        return None
    fallen = {node: choice for node, choice in choices.items() if choice["how"] == "fallback"}
    if fallen:
        detail = "; ".join(f"{node} serves torch: {choice['why']}" for node, choice in fallen.items())
        return False, detail, FIX_FALLBACK
    return True, "; ".join(f"{node}: {choice['served']} ({choice['why']})" for node, choice in choices.items()), ""


def runtime_metric(replies: dict[str, Any]) -> Iterator[Any]:
    """inference_worker_runtime_info: 1 per auto worker, labelled with its route and how it was chosen."""
    info = GaugeMetricFamily(
        "inference_worker_runtime_info",
        "1 per worker on INFERENCE_BACKEND=auto: what it serves by request size (served) and how it was "
        "chosen (measured on this host, or fallback: torch, nothing faster could be measured)",
        labels=["worker", "served", "how"],
    )
    for node, choice in choices_of(replies).items():
        info.add_metric([node, choice["served"], choice["how"]], 1)
    yield info

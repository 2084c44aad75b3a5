"""How doctor and status name a worker's runtime and a child's device in their tables."""

from __future__ import annotations

from typing import Any


def runtime_label(report: dict[str, Any]) -> str:
    """The model runtime and the precision its children compute in, e.g. "torch/native-bert f32"; an auto
    worker's route, e.g. "auto: ctranslate2 int8"."""
    if choice := report.get("runtime_choice"):
        return f"auto: {choice['served']}"
    precisions = sorted({child.get("precision") or "?" for child in report["children"]}) or ["?"]
    return f"{runtime_name(report.get('backend', 'torch'), report.get('engine'))} {'/'.join(precisions)}"


def runtime_name(backend: str, engine: str | None) -> str:
    """The runtime with its engine where it has one: "openvino", "torch/native-bert"."""
    return f"{backend}/{engine}" if engine else backend


def device_label(child: dict[str, Any]) -> str:
    """A child's device, with the CUDA memory torch holds there: "cuda:0 (160 MiB)", "cpu"."""
    device = child.get("device", "cpu")
    return f"{device} ({child.get('gpu_memory_mib', 0)} MiB)" if device.startswith("cuda") else device

"""Moving a torch-run model (an embedder or a cross-encoder) onto a child's device."""

from __future__ import annotations

from typing import Any

CUDA_PRECISIONS = {"float16": "f16", "bfloat16": "bf16"}


def place_module(module: Any, device: str, dtype: str) -> str | None:
    """Move `module` to `device`, in `dtype` on CUDA; the precision it then computes in, or None if unchanged."""
    import torch

    module.to(device)
    if device.startswith("cuda") and dtype != "float32":
        module.to(getattr(torch, dtype))
        return CUDA_PRECISIONS.get(dtype, dtype)
    return None

"""What this worker process sees of its GPUs, through torch: counts before fork, memory, MPS.

Kept out of devices.py (which producers import through config/settings.py) because these calls load
torch. GPUs are counted through NVML (PYTORCH_NVML_BASED_CUDA_CHECK) so the worker's main process
never creates a CUDA context: a child forked from one could not use CUDA again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any

from inference_tasks.devices import CUDA

# The MPS control daemon's pipe directory (NVIDIA's default, or CUDA_MPS_PIPE_DIRECTORY).
DEFAULT_MPS_PIPE_DIRECTORY = "/tmp/nvidia-mps"


def visible_gpu_count() -> int:
    """GPUs this process may use, counted without creating a CUDA context (safe before fork)."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    return torch.cuda.device_count()


def cuda_initialized() -> bool:
    """Whether this process has initialised CUDA (must stay False in a worker's main process)."""
    import sys

    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def mps_active(environ: Mapping[str, str] | None = None) -> bool:
    """Whether an NVIDIA MPS control daemon is listening where this process's CUDA would look.

    The daemon's control pipe (a FIFO) stays in its directory after the daemon quits, so its existence
    alone said "active" on a host with no daemon (seen on the GPU check's second run). Opening a FIFO
    for writing without blocking succeeds only while a reader holds it open: the daemon. Nothing is
    written; anything other than a FIFO there counts by existence, as before.
    """
    variables = os.environ if environ is None else environ
    pipe_directory = variables.get("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_MPS_PIPE_DIRECTORY)
    control = os.path.join(pipe_directory, "control")
    try:
        if not stat.S_ISFIFO(os.stat(control).st_mode):
            return True
        os.close(os.open(control, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # absent, or ENXIO: a pipe nobody reads
        return False
    return True


def gpu_memory(device: str) -> dict[str, Any] | None:
    """This process's CUDA memory on `device` (allocated and reserved by torch), or None on CPU."""
    if not device.startswith(CUDA):
        return None
    import torch

    return {
        "allocated_bytes": torch.cuda.memory_allocated(device),
        "reserved_bytes": torch.cuda.memory_reserved(device),
    }


def gpu_memory_mib(device: str) -> int:
    """CUDA memory torch holds (reserved) on `device`, in MiB; 0 on the CPU."""
    memory = gpu_memory(device)
    return memory["reserved_bytes"] >> 20 if memory else 0

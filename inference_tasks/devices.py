"""Which device each prefork child runs its model on; the worker's main process never touches CUDA.

CUDA cannot be used again in a child forked from a process that initialised it ("Cannot
re-initialize CUDA in forked subprocess"), so the main process counts GPUs through NVML
(PYTORCH_NVML_BASED_CUDA_CHECK, no CUDA context), keeps any preloaded model on the CPU, and
each child moves its copy to its own GPU. Child i of the pool uses GPU i mod (visible GPUs),
from the pool's stable child index, so a recycled child returns to the GPU its slot had.
The choice is a pure function (`choose_device`), tested without a GPU.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CPU = "cpu"
CUDA = "cuda"
AUTO = "auto"
DEVICE_PATTERN = re.compile(r"^(cpu|cuda|auto|cuda:\d+)$")
DTYPES = ("float32", "float16", "bfloat16")
# The MPS control daemon's pipe directory (NVIDIA's default, or CUDA_MPS_PIPE_DIRECTORY).
DEFAULT_MPS_PIPE_DIRECTORY = "/tmp/nvidia-mps"
# One directory per installed GPU while the NVIDIA driver is loaded.
NVIDIA_DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")


class NoGpu(ValueError):
    """A CUDA device was asked for and none is visible."""


def is_valid_device(setting: str) -> bool:
    return bool(DEVICE_PATTERN.match(setting))


def choose_device(setting: str, child_index: int | None, gpu_count: int) -> str:
    """The torch device string for one child (or a solo worker: child_index None).

    cpu -> cpu; auto -> as cuda with a GPU, else cpu; cuda -> the only GPU when there is one
    (no round-robin at all), else GPU (child index mod GPU count); cuda:N -> GPU N for every child.
    """
    if setting == CPU or (setting == AUTO and gpu_count == 0):
        return CPU
    if gpu_count == 0:
        raise NoGpu(f"INFERENCE_DEVICE={setting} but no CUDA device is visible (CUDA_VISIBLE_DEVICES, drivers?)")
    if setting.startswith(f"{CUDA}:"):
        index = int(setting.split(":", 1)[1])
        if index >= gpu_count:
            raise NoGpu(f"INFERENCE_DEVICE={setting} but only {gpu_count} GPU(s) are visible")
        return setting
    if gpu_count == 1:
        return f"{CUDA}:0"
    return f"{CUDA}:{(child_index or 0) % gpu_count}"


def default_concurrency(setting: str, gpu_count: int, children_per_gpu: int, cores: int) -> int:
    """Children for a worker whose INFERENCE_CONCURRENCY is unset: per GPU on CUDA, per core on CPU."""
    if setting == CPU or gpu_count == 0:
        return cores
    if setting.startswith(f"{CUDA}:"):
        return children_per_gpu
    return gpu_count * children_per_gpu


def gpus_on_this_host(environ: Mapping[str, str], driver_dir: Path = NVIDIA_DRIVER_GPUS) -> int:
    """GPUs visible to this process, from the driver's /proc entries and CUDA_VISIBLE_DEVICES.

    Imports nothing: producers and Flower read settings too, and must never load torch.
    """
    try:
        installed = sum(1 for _ in driver_dir.iterdir())
    except OSError:
        return 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return installed
    count = 0
    for entry in (part.strip() for part in visible.split(",")):
        if not entry or entry.startswith("-"):  # CUDA stops at the first invalid entry ("-1": none)
            break
        count += 1
    return min(count, installed)


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


def mps_active(environ: dict[str, str] | None = None) -> bool:
    """Whether an NVIDIA MPS control daemon is listening where this process's CUDA would look."""
    environ = os.environ if environ is None else environ
    pipe_directory = environ.get("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_MPS_PIPE_DIRECTORY)
    return os.path.exists(os.path.join(pipe_directory, "control"))


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


def place_model(holder: Any, settings: Any) -> None:
    """In a child (or a solo worker): load the model, or move the main process's CPU copy, onto
    this process's device, with that device's encode batch size.

    A child that finds no GPU keeps no model and records why, so every task fails with the
    reason (Celery swallows exceptions raised in worker hooks).
    """
    import logging

    from inference_tasks.models import LOAD_IN_CHILD

    logger = logging.getLogger(__name__)
    try:
        gpus = visible_gpu_count() if settings.device != CPU else 0
        device = choose_device(settings.device, holder.pool_slot, gpus)
    except NoGpu as error:
        holder.embedder, holder.error = None, str(error)
        logger.error("%s; every task in this process will fail", error)
        return
    if holder.embedder is None:
        holder.load(settings.model, device, mode=LOAD_IN_CHILD)
        if holder.embedder is not None and device.startswith(CUDA) and settings.cuda_dtype != "float32":
            holder.embedder.place(device, settings.cuda_dtype)
    elif holder.embedder.device != device:
        holder.embedder.place(device, settings.cuda_dtype)
    if holder.embedder is None:
        return
    on_gpu = device.startswith(CUDA)
    holder.embedder.batch_size = settings.encode_batch_size_cuda if on_gpu else settings.encode_batch_size_cpu
    logger.info("model on %s (encode batch size %d)", device, holder.embedder.batch_size)

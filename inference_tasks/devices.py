"""Device settings and the choice of device per prefork child: pure functions, no torch.

Read by config/settings.py (so by producers too); the worker's runtime view of GPUs (counts through NVML,
memory, MPS) is worker/host/gpu.py, and moving a model onto its device is worker/models.place_model.
Why the worker's main process never touches CUDA:

CUDA cannot be used again in a child forked from a process that initialised it ("Cannot
re-initialize CUDA in forked subprocess"), so the main process counts GPUs through NVML
(PYTORCH_NVML_BASED_CUDA_CHECK, no CUDA context), keeps any preloaded model on the CPU, and
each child moves its copy to its own GPU. Child i of the pool uses GPU i mod (visible GPUs),
from the pool's stable child index, so a recycled child returns to the GPU its slot had.
The choice is a pure function (`choose_device`), tested without a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

CPU = "cpu"
CUDA = "cuda"
AUTO = "auto"
DEVICE_PATTERN = re.compile(r"^(cpu|cuda|auto|cuda:\d+)$")
DTYPES = ("float32", "float16", "bfloat16")
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

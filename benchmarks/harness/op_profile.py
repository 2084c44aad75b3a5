"""Where an OpenVINO candidate's time goes: the CPU plugin's per-op performance counters for one batch,
summed per operation type and the kernel it ran with (on AMX, `brgemm_avx512_amx` kernels for bf16 and
int8 matrix products; elsewhere `brgemm_avx512_bf16`, `brgemm_avx512_I8`, ...). One thread, as a
worker's child runs it; the mean of PASSES passes after a warm one."""

from __future__ import annotations

from pathlib import Path

PASSES = 3
ROWS = 8


def op_profile(path: Path, precision: str, batch: list[str]) -> dict[str, float]:
    """Mean milliseconds per 'operation type / kernel' for `batch` in one inference call, largest first."""
    from inference_tasks.worker.runtimes.openvino_model import OpenVinoEmbedder

    embedder = OpenVinoEmbedder("all-MiniLM-L6-v2", path, precision)
    embedder.batch_size = len(batch)  # one inference call, whose counters are read
    embedder.compile(1, op_counters=True)
    embedder.encode(batch, normalize=True)
    totals: dict[str, float] = {}
    for _ in range(PASSES):
        embedder.encode(batch, normalize=True)
        for (op_type, kernel), ms in embedder.op_times().items():
            totals[f"{op_type} / {kernel}"] = totals.get(f"{op_type} / {kernel}", 0.0) + ms / PASSES
    return dict(sorted(((key, round(ms, 3)) for key, ms in totals.items()), key=lambda item: -item[1]))


def print_profile(name: str, times: dict[str, float], texts: int) -> None:
    whole = sum(times.values())
    print(f"\n{name}: {whole:.1f} ms per {texts}-text batch (per-op counters, one thread); by op type and kernel:")
    for key, ms in list(times.items())[:ROWS]:
        print(f"  {ms:8.2f} ms {ms / whole:6.1%}  {key}")

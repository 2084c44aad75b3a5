"""OpenVINO int8 (the NNCF export) next to torch, OpenVINO f32 and OpenVINO's own choice (bf16 where the
CPU has it), in process, one thread, alternated, median of the rounds: 64-text batches of tickets,
single sentences, and the mixed workload (64-text batches, 10 % texts of 200+ words); plus each
runtime's min cosine to torch on the tickets.

Exports (full precision, then int8) into a temporary model cache first; nothing is downloaded.

    .venv/bin/python -m benchmarks.int8 [--rounds 3] [--seconds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from benchmarks.harness.alternation import alternated
from benchmarks.harness.op_profile import op_profile, print_profile
from benchmarks.harness.report import cpu_name
from benchmarks.harness.runner import per_call_us
from benchmarks.harness.workload import make_batches, ticket_texts
from benchmarks.token_batches import mixed_batches

# (name, runtime, export, INFERENCE_OPENVINO_PRECISION)
RUNTIMES = [
    ("torch", "torch", None, None),
    ("openvino f32", "openvino", "f32", "f32"),
    ("openvino auto", "openvino", "f32", "auto"),
    ("openvino int8", "openvino", "int8", "int8"),
    ("int8, f32 elsewhere", "openvino", "int8", "f32"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--profile", action="store_true", help="also print where int8's time goes, per op type")
    options = parser.parse_args()
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.openvino.export import export_openvino, export_openvino_int8
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    cache = tempfile.mkdtemp(prefix="int8-bench-")
    settings = Settings(model_cache=cache)
    paths = {"f32": export_openvino(settings).path, "int8": export_openvino_int8(settings).path}
    encoders = {}
    for name, runtime, export, precision in RUNTIMES:
        if runtime == "torch":
            encoder = load_dense_encoder("all-MiniLM-L6-v2", "cpu", LoadOptions())
        else:
            encoder = OpenVinoEncoder("all-MiniLM-L6-v2", paths[export], precision)
            encoder.compile(1)
        encoder.max_pass_tokens = 2048
        encoders[name] = encoder
    threads.limit_loaded_pools(1)
    workloads = {
        "64 tickets": make_batches(4, 64, seed=21),
        "single": make_batches(4, 1, seed=22),
        "mixed 64": mixed_batches(4, seed=23),
    }
    tickets = ticket_texts()
    reference = encoders["torch"].encode(tickets, normalize=True)
    cosine = {
        name: float((e.encode(tickets, normalize=True) * reference).sum(axis=1).min()) for name, e in encoders.items()
    }
    rates: dict[tuple[str, str], list[float]] = {}
    configs = [(name, workload) for name in encoders for workload in workloads]
    for round_index, (name, workload) in alternated(configs, options.rounds):
        batch = workloads[workload][round_index % 4]
        call_us = per_call_us(lambda e=encoders[name], b=batch: e.encode(b, normalize=True), options.seconds)
        rates.setdefault((name, workload), []).append(len(batch) / (call_us / 1e6))
    print(f"CPU: {cpu_name()}; all-MiniLM-L6-v2, one thread; texts/s (median of {options.rounds} rounds)")
    print(f"{'runtime':<22} {'precision':<9} {'min cos':>8} " + " ".join(f"{w:>10}" for w in workloads))
    for name, encoder in encoders.items():
        cells = " ".join(f"{statistics.median(rates[(name, w)]):>10.0f}" for w in workloads)
        print(f"{name:<22} {encoder.precision or '?':<9} {cosine[name]:>8.4f} {cells}")
    auto = {w: statistics.median(rates[("openvino auto", w)]) for w in workloads}
    for name in ("openvino int8", "int8, f32 elsewhere"):
        ratios = ", ".join(f"{w} {statistics.median(rates[(name, w)]) / auto[w]:.2f}x" for w in workloads)
        print(f"{name} / openvino auto: {ratios}")
    if options.profile:
        for name, export, precision in (("openvino auto", "f32", "auto"), ("openvino int8", "int8", "int8")):
            batch = workloads["64 tickets"][0]
            print_profile(name, op_profile(paths[export], precision, batch), len(batch))
    f32 = {w: statistics.median(rates[("openvino f32", w)]) for w in workloads}
    ratios = ", ".join(f"{w} {statistics.median(rates[('int8, f32 elsewhere', w)]) / f32[w]:.2f}x" for w in workloads)
    print(f"int8, f32 elsewhere / openvino f32 (a CPU without bf16): {ratios}")


if __name__ == "__main__":
    main()

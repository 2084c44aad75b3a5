"""Forward passes bounded by tokens against passes of a fixed number of texts, on the mixed workload
micro-batching sends a child (90 % one-line tickets, 10 % texts of 200+ words), in process, one thread,
configurations alternated, median of the rounds: padding waste (padded tokens / real tokens) and
texts per second for each INFERENCE_MICROBATCH_MAX_TOKENS, 0 being sentence-transformers' own
grouping (sorted by characters, 32 texts per pass).

    .venv/bin/python -m benchmarks.token_batches [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name
from benchmarks.harness.runner import per_call_us
from benchmarks.harness.workload import ticket_texts

BATCH = 64
SETTINGS = (0, 1024, 2048, 4096, 8192)


def mixed_batches(count: int, seed: int) -> list[list[str]]:
    """`count` batches of 64 texts: 90 % one ticket, 10 % a document of 200+ words (tickets joined)."""
    rng = random.Random(seed)
    tickets = ticket_texts()
    batches = []
    for _ in range(count):
        batch = []
        for _ in range(BATCH):
            if rng.random() < 0.1:
                words: list[str] = []
                while len(words) < 200:
                    words.extend(rng.choice(tickets).split())
                batch.append(" ".join(words))
            else:
                batch.append(rng.choice(tickets))
        batches.append(batch)
    return batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    options = parser.parse_args()
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    from benchmarks.harness.passes import fixed_size_passes, padded_tokens
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.passes import forward_passes
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    encoder = load_dense_encoder("all-MiniLM-L6-v2", "cpu", LoadOptions())
    threads.limit_loaded_pools(1)
    encoder.encode(["warm-up"], normalize=True)
    batches = mixed_batches(8, seed=5)
    limit = encoder.max_tokens or 256
    waste = {}
    for setting in SETTINGS:
        padded = real = 0
        for batch in batches:
            counts = [min(count, limit) for count in encoder.token_counts(batch)]
            passes = forward_passes(counts, 32, setting) if setting else fixed_size_passes([len(t) for t in batch], 32)
            padded += padded_tokens(counts, passes)
            real += sum(counts)
        waste[setting] = padded / real
    speeds: dict[int, list[float]] = {setting: [] for setting in SETTINGS}
    for round_index, setting in alternated(SETTINGS, options.rounds):
        encoder.max_pass_tokens = setting or None
        batch = batches[round_index % len(batches)]
        call_us = per_call_us(lambda b=batch: encoder.encode(b, normalize=True), options.seconds)
        speeds[setting].append(BATCH / (call_us / 1e6))
    print(f"CPU: {cpu_name()}; all-MiniLM-L6-v2 (torch), one thread; 64-text batches, 10 % of 200+ words")
    base = statistics.median(speeds[0])
    print(f"{'max tokens':>10} {'padding waste':>14} {'texts/s':>9} {'vs 0':>6}")
    for setting in SETTINGS:
        speed = statistics.median(speeds[setting])
        print(f"{setting:>10} {waste[setting]:>14.2f} {speed:>9.1f} {speed / base:>6.2f}")


if __name__ == "__main__":
    main()

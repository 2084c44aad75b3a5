"""The built-in multilingual model in process, one thread: how fast, and whether Korean and Japanese
tickets land where they should, next to all-MiniLM-L6-v2 (torch) on the same texts in the same run.

    .venv/bin/python -m benchmarks.multilingual [--seconds 3]
"""

from __future__ import annotations

import argparse
import os

from benchmarks.harness.report import cpu_name
from benchmarks.harness.runner import per_call_us
from benchmarks.harness.workload import make_batches
from inference_tasks.config.defaults import DEFAULT_MODEL, MULTILINGUAL_MODEL

PAIRS = [  # a Korean or Japanese ticket, its English translation, an unrelated ticket in its language
    (
        "결제가 두 번 청구되었습니다. 환불해 주세요.",
        "I was charged twice. Please refund me.",
        "배송 주소를 변경하고 싶습니다.",
    ),
    (
        "二重に請求されました。返金してください。",
        "I was charged twice. Please refund me.",
        "配送先の住所を変更したいです。",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    options = parser.parse_args()
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    batch, single = make_batches(1, 64, seed=3)[0], make_batches(1, 1, seed=4)[0]
    print(f"CPU: {cpu_name()}; one thread; texts/s (batches of 64 support tickets / one at a time)")
    for name in (MULTILINGUAL_MODEL, DEFAULT_MODEL):
        encoder = load_dense_encoder(name, "cpu", LoadOptions())
        encoder.compile(1)
        threads.limit_loaded_pools(1)
        encoder.encode(["warm-up"], normalize=True)
        batched = 64 / (per_call_us(lambda e=encoder: e.encode(batch, normalize=True), options.seconds) / 1e6)
        alone = 1 / (per_call_us(lambda e=encoder: e.encode(single, normalize=True), options.seconds) / 1e6)
        margins = []
        for ticket, translation, unrelated in PAIRS:
            vectors = encoder.encode([ticket, translation, unrelated], normalize=True)
            margins.append(f"{vectors[0] @ vectors[1]:.3f} vs {vectors[0] @ vectors[2]:.3f}")
        print(f"{name:<45} {batched:8.0f} / {alone:6.0f}   ko, ja: translation vs unrelated {'; '.join(margins)}")


if __name__ == "__main__":
    main()

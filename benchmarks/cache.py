"""The fleet's embedding cache, on and off, side by side in one run (issue 57, item 7).

Two workers as shipped (the default runtime, concurrency = cores), identical but for
INFERENCE_CACHE_URL, each on its own broker database; the cache is a redis-server of its own with
maxmemory and allkeys-lru. Rounds alternate the two (harness/alternation.py), so drift of the shared
machine hits both alike. In each round and for each repeat rate (0, 50, 90, 100 %):

- throughput: 16 tasks of 64 texts pushed at once, of which that share are texts the worker has
  embedded before (a pool sent once at the start, to both workers) and the rest texts never sent
  before (a serial number makes each one new); sentences per second over the burst. Both workers
  get the same tasks in a round (their new texts differ by one marker of the same length), so the
  texts' lengths, which set a pass's padding, are not one more difference between them;
- latency: 6 such tasks one at a time, push to stored result p50.

Then one-text tasks, one at a time: an all-hit text against a miss on the cache worker, and on the
worker without a cache the queue's own overhead (push to stored, less the task's own inference_ms).
Last, what a cached vector costs the cache's Redis: MEMORY USAGE of its entries, and vectors per GB.

    .venv/bin/python -m benchmarks.cache            # ~3 minutes on 2 cores
    .venv/bin/python -m benchmarks.cache --quick    # a smoke run of every path
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.alternation import alternated
from benchmarks.harness.pushes import PushStamps, one_text_timed
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, ticket_texts
from inference_tasks.producer import collect, send
from inference_tasks.redis_access.keys import CACHE_KEY_PREFIX
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import start_redis, start_worker

REPEATS = (0.0, 0.5, 0.9, 1.0)
TASK_TEXTS = 64
RESULT_TIMEOUT_S = 300
GOALS = {"speedup_at_90": 5.0, "all_hit_over_overhead_ms": 0.5, "slower_at_0": 0.03}


class Texts:
    """The seen pool (sent once to both workers before measuring) and an endless supply of new texts."""

    def __init__(self, pool_size: int) -> None:
        self.tickets = ticket_texts()
        self.seen = [f"{text} (case {index})" for index, text in enumerate(self.tickets[:pool_size])]
        self.serial = 0

    def fresh(self, count: int) -> list[str]:
        texts = []
        for _ in range(count):
            self.serial += 1
            texts.append(f"{self.tickets[self.serial % len(self.tickets)]} (ticket {self.serial})")
        return texts

    def task(self, repeat: float) -> list[str]:
        repeated = round(TASK_TEXTS * repeat)
        start = (self.serial * 7) % max(1, len(self.seen) - repeated)
        return self.seen[start : start + repeated] + self.fresh(TASK_TEXTS - repeated)


def burst(app: Any, tasks: list[list[str]]) -> float:
    """Sentences per second when `tasks` are pushed at once, then collected."""
    began = time.perf_counter()
    sent = [send(app, EMBED_TASK, args=[texts]) for texts in tasks]
    for result in sent:
        collect(result, RESULT_TIMEOUT_S)
    return sum(len(texts) for texts in tasks) / (time.perf_counter() - began)


def one_at_a_time(app: Any, tasks: list[list[str]]) -> list[float]:
    took = []
    for texts in tasks:
        began = time.perf_counter()
        collect(send(app, EMBED_TASK, args=[texts]), RESULT_TIMEOUT_S)
        took.append((time.perf_counter() - began) * 1000)
    return took


def measure_levels(workers: dict[str, Any], texts: Texts, rounds: int, burst_tasks: int, serial_tasks: int) -> dict:
    found: dict[str, dict[float, dict[str, list[float]]]] = {
        name: {repeat: {"sent_per_s": [], "p50_ms": []} for repeat in REPEATS} for name in workers
    }
    plan: dict[float, tuple[list[list[str]], list[list[str]]]] = {}
    planned_round = -1
    for round_index, name in alternated(list(workers), rounds):
        if round_index != planned_round:  # each round's tasks, the same for both workers
            plan = {repeat: ([texts.task(repeat) for _ in range(burst_tasks)],
                             [texts.task(repeat) for _ in range(serial_tasks)]) for repeat in REPEATS}  # fmt: skip
            planned_round = round_index
        app, marker = workers[name].app, f"(ticket {name[-2:]}-"  # the same texts, each worker's own new ones
        for repeat in REPEATS:
            bursts, serial = ([[text.replace("(ticket ", marker) for text in task] for task in tasks]
                              for tasks in plan[repeat])  # fmt: skip
            found[name][repeat]["sent_per_s"].append(burst(app, bursts))
            found[name][repeat]["p50_ms"] += one_at_a_time(app, serial)
    summary = {
        name: {f"{round(repeat * 100)}%": {"sentences_per_s": statistics.median(row["sent_per_s"]),
                                           "task_p50_ms": statistics.median(row["p50_ms"])}
               for repeat, row in levels.items()}
        for name, levels in found.items()
    }  # fmt: skip
    for repeat in REPEATS:  # each round's on/off ratio over the same tasks, then their median
        on, off = found["cache on"][repeat]["sent_per_s"], found["cache off"][repeat]["sent_per_s"]
        ratios = [mine / theirs for mine, theirs in zip(on, off, strict=True)]
        summary["cache on"][f"{round(repeat * 100)}%"]["paired_ratio"] = statistics.median(ratios)
    return summary


def one_text(workers: dict[str, Any], texts: Texts, calls: int) -> dict[str, float]:
    """Push to stored p50: an all-hit text and a miss on the cache worker; the queue's own overhead
    (push to stored less inference_ms) on the worker without one."""
    stamps = PushStamps()
    try:
        rows: dict[str, list[tuple[float, ...]]] = {"hit": [], "miss": [], "off": []}
        for _ in range(calls):
            rows["hit"].append(one_text_timed(workers["cache on"].app, stamps, texts.seen[0]))
            rows["miss"].append(one_text_timed(workers["cache on"].app, stamps, texts.fresh(1)[0]))
            rows["off"].append(one_text_timed(workers["cache off"].app, stamps, texts.fresh(1)[0]))
    finally:
        stamps.close()
    return {
        "all_hit_p50_ms": statistics.median(row[4] for row in rows["hit"]),
        "all_hit_inference_p50_ms": statistics.median(row[3] for row in rows["hit"]),
        "miss_p50_ms": statistics.median(row[4] for row in rows["miss"]),
        "off_p50_ms": statistics.median(row[4] for row in rows["off"]),
        "queue_overhead_p50_ms": statistics.median(row[4] - row[3] for row in rows["off"]),
    }


def miss_path_ms(url: str, texts: Texts, tasks: int = 200) -> dict[str, float]:
    """What the cache adds to a 64-text task that misses everything, without the model's noise: keys,
    one MGET, packing and 64 pipelined SETs around a compute that returns ready vectors (p50 ms),
    and an all-hit read of the same 64 (keys, MGET, checks, the stacked matrix)."""
    import numpy as np

    from inference_tasks.config import Settings
    from inference_tasks.worker.cache.identity import DENSE
    from inference_tasks.worker.cache.lookup import VectorCache, rows_through_cache
    from inference_tasks.worker.cache.store import CacheStore

    class Ready:
        backend, precision, max_tokens, dim = "benchmark", "f32", 256, 384

    vectors = np.random.default_rng(0).standard_normal((TASK_TEXTS, 384)).astype(np.float32)
    cache = VectorCache(CacheStore(Settings(cache_url=url)), "benchmark", "mean")
    space, model = cache.space(Ready(), DENSE, True), Ready()
    missed, hit = [], []
    for _ in range(tasks):
        batch = texts.fresh(TASK_TEXTS)
        for took in (missed, hit):  # the first pass misses every text, the second reads them back
            began = time.perf_counter()
            rows_through_cache(cache, space, model, batch, lambda misses: vectors[: len(misses)])
            took.append((time.perf_counter() - began) * 1000)
    return {"miss_64_p50_ms": statistics.median(missed), "hit_64_p50_ms": statistics.median(hit)}


def entry_bytes(url: str, sample: int = 200) -> dict[str, float]:
    """MEMORY USAGE of the cache's entries (key, value, expiry and Redis' own overhead), on average."""
    client = redis.Redis.from_url(url)
    keys = [key for _, key in zip(range(sample), client.scan_iter(f"{CACHE_KEY_PREFIX}*", count=500), strict=False)]
    per_entry = statistics.mean(client.memory_usage(key, samples=0) for key in keys)
    return {"entries": client.dbsize(), "bytes_per_vector": per_entry, "vectors_per_gb": 2**30 / per_entry}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "cache.json")
    args = parser.parse_args()
    rounds, burst_tasks, serial_tasks, calls = (1, 4, 2, 10) if args.quick else (args.rounds, 16, 6, 60)
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    broker = start_redis(work / "broker")
    cache = start_redis(work / "cache", extra_args=("--maxmemory", "1gb", "--maxmemory-policy", "allkeys-lru"))
    texts = Texts(pool_size=1024)
    workers: dict[str, Any] = {}
    try:
        for index, (name, extra) in enumerate((("cache on", {"cache_url": cache.url(0)}), ("cache off", {}))):
            workers[name] = start_worker(name.replace(" ", "-"), broker.url(index), work, dict(os.environ),
                                         backend="auto", **extra)  # fmt: skip
        for worker in workers.values():  # the seen pool: embedded once by both, cached by one
            burst(
                worker.app, [texts.seen[start : start + TASK_TEXTS] for start in range(0, len(texts.seen), TASK_TEXTS)]
            )
        levels = measure_levels(workers, texts, rounds, burst_tasks, serial_tasks)
        single = one_text(workers, texts, calls)
        memory = entry_bytes(cache.url(0)) | miss_path_ms(cache.url(0), texts)
    finally:
        for worker in workers.values():
            worker.stop()
        for server in (broker, cache):
            server.process.terminate()
            server.process.wait(timeout=10)
    report(levels, single, memory, args.out, rounds)


def report(levels: dict, single: dict, memory: dict, out: Path, rounds: int) -> None:
    on, off = levels["cache on"], levels["cache off"]
    print(f"CPU: {cpu_name()}; two workers (the default runtime, concurrency = cores), alternated, {rounds} rounds")
    print("64-text tasks     cache on sent/s  cache off sent/s  ratio*  on p50 ms  off p50 ms")
    for level in on:
        ratio = on[level]["paired_ratio"]
        print(f"  {level:>4} repeated  {on[level]['sentences_per_s']:>14.0f}  {off[level]['sentences_per_s']:>16.0f}"
              f"  {ratio:>5.2f}x  {on[level]['task_p50_ms']:>9.1f}  {off[level]['task_p50_ms']:>10.1f}")  # fmt: skip
    over = single["all_hit_p50_ms"] - single["queue_overhead_p50_ms"]
    print(f"one text, push to stored p50: all hit {single['all_hit_p50_ms']:.2f} ms, miss {single['miss_p50_ms']:.2f} "
          f"ms, no cache {single['off_p50_ms']:.2f} ms; queue's own overhead {single['queue_overhead_p50_ms']:.2f} ms "
          f"(all hit over it: {over:+.2f} ms)")  # fmt: skip
    share = memory["miss_64_p50_ms"] / off["0%"]["task_p50_ms"]
    print(f"the cache's own work on a 64-text task (no model): all miss {memory['miss_64_p50_ms']:.2f} ms p50 "
          f"({share:.1%} of a computed task's p50), all hit {memory['hit_64_p50_ms']:.2f} ms")  # fmt: skip
    print(f"cache Redis: {memory['bytes_per_vector']:.0f} bytes per cached vector (MEMORY USAGE), "
          f"{memory['vectors_per_gb'] / 1e6:.2f} M vectors per GB; {memory['entries']} entries")  # fmt: skip
    print("  * the median over rounds of each round's on/off ratio (both workers ran the same tasks in a round)")
    speedup = on["90%"]["paired_ratio"]
    slower = 1 - on["0%"]["paired_ratio"]
    verdicts = {
        f">= {GOALS['speedup_at_90']}x at 90 % repeats": (f"{speedup:.2f}x", speedup >= GOALS["speedup_at_90"]),
        f"all hit within {GOALS['all_hit_over_overhead_ms']} ms of the queue's overhead": (
            f"{over:+.2f} ms", over <= GOALS["all_hit_over_overhead_ms"]),
        f"at most {GOALS['slower_at_0']:.0%} slower at 0 % repeats": (f"{slower:+.1%}", slower <= GOALS["slower_at_0"]),
    }  # fmt: skip
    for goal, (value, met) in verdicts.items():
        print(f"  goal {goal}: {value} ({'met' if met else 'not met'})")
    summary = {"speedup_at_90": speedup, "slower_at_0": slower, "all_hit_over_overhead_ms": over}
    write_report(out, "cache", {"rounds": rounds, "levels": levels, "one_text": single, "memory": memory, **summary})


if __name__ == "__main__":
    main()

"""Soak benchmark: the worker at full speed for minutes; does Redis memory stay flat?

Starts a redis-server and a prefork worker as shipped (concurrency = cores), then:

- steady: Python producer threads and one Ruby client process embed 64-text batches in a closed
  loop, reading results the documented way (producer.collect / the Ruby client's embed: each
  result deleted by the read that returns it), for --minutes;
- burst: one Python producer pushes as fast as it can with max_queue_depth set (far faster than
  the worker serves) while a reader collects in order: QueueFull is raised, and every accepted
  task's result must arrive (lost = accepted - collected);
- kept (the control, measured in the same run): the Python producers again, but keeping the
  results they read (keep=True), as every producer did before results were deleted on read: the
  growth per minute is what the steady phase would have cost.

Every second it samples Redis `used_memory`, the queue depth and the results collected, and
writes JSON plus a PNG plot of memory and throughput over time. Goal: the steady phase's last
minute's mean memory within 50 MB of its first minute's.

    .venv/bin/python -m benchmarks.soak               # 10 minutes steady + 1 minute burst
    .venv/bin/python -m benchmarks.soak --quick       # a smoke run of every path (~1 minute)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.host import stop_cleanly_on_term
from benchmarks.harness.report import write_report
from benchmarks.harness.workload import make_batches
from inference_tasks import producer
from inference_tasks.cores import available_cores
from inference_tasks.redis_access.queue_state import queue_depth, redis_memory
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support import localstack

HERE = Path(__file__).resolve().parent
RUBY_PRODUCER = HERE / "soak_producer.rb"
RUBY_DONE_KEY = "soak:ruby-done"
RESULT_TIMEOUT_S = 300
BATCH_SIZE = 64
MB = 1024 * 1024


class Counter:
    """Results collected so far by the Python producers (thread-safe)."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, amount: int = 1) -> None:
        with self._lock:
            self.value += amount


def closed_loop(
    app, batches: list[list[str]], until: float, done: Counter, errors: Counter, index: int, keep: bool = False
) -> None:
    """One producer: send a batch, wait for its result (deleting it unless `keep`), repeat until `until`."""
    turn = index
    while time.monotonic() < until:
        try:
            sent = producer.send(app, EMBED_TASK, args=[batches[turn % len(batches)]])
            vectors = producer.collect(sent, RESULT_TIMEOUT_S, keep=keep)["embeddings"]
            assert len(vectors) == BATCH_SIZE
            done.add()
        except Exception as error:  # noqa: BLE001 - counted and reported, the soak goes on
            errors.add()
            print(f"producer {index}: {type(error).__name__}: {error}", file=sys.stderr)
        turn += 7


def burst(app, batches: list[list[str]], seconds: float, max_depth: int, done: Counter) -> dict:
    """Push as fast as possible with max_queue_depth; a reader thread collects every accepted result."""
    accepted: queue.Queue = queue.Queue()
    refused = 0
    errors = Counter()
    stop_reading = threading.Event()

    def reader() -> None:
        while not (stop_reading.is_set() and accepted.empty()):
            try:
                sent = accepted.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                producer.collect(sent, RESULT_TIMEOUT_S)
                done.add()
            except Exception as error:  # noqa: BLE001 - a lost or failed task is what this counts
                errors.add()
                print(f"burst reader: {type(error).__name__}: {error}", file=sys.stderr)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    pushed = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            batch = batches[pushed % len(batches)]
            accepted.put(producer.send(app, EMBED_TASK, args=[batch], max_queue_depth=max_depth))
            pushed += 1
        except producer.QueueFull:
            refused += 1
            time.sleep(0.005)  # a producer backing off; the harness's own CPU stays small
    stop_reading.set()
    thread.join(timeout=RESULT_TIMEOUT_S + 60)
    return {"accepted": pushed, "queue_full": refused, "failed_or_lost": errors.value}


def sample(client: redis.Redis, started: float, done: Counter, phase: list[str], samples: list[dict], stop) -> None:
    """Every second: time, phase, used_memory, queue depth, results collected (Python + Ruby)."""
    while not stop.wait(1.0):
        memory = redis_memory(client)
        ruby_done = int(client.get(RUBY_DONE_KEY) or 0)
        samples.append(
            {
                "t": round(time.monotonic() - started, 2),
                "phase": phase[0],
                "used_memory_mb": memory.used_bytes / MB,
                "queue_depth": queue_depth(client, INFERENCE_QUEUE),
                "collected": done.value + ruby_done,
            }
        )


def window_mean(samples: list[dict], phase: str, first: bool, seconds: float) -> float:
    rows = [s for s in samples if s["phase"] == phase]
    if not rows:
        return float("nan")
    edge = rows[0]["t"] + seconds if first else rows[-1]["t"] - seconds
    picked = [s["used_memory_mb"] for s in rows if (s["t"] <= edge if first else s["t"] >= edge)]
    return statistics.mean(picked)


def kept_growth(samples: list[dict], results: int) -> dict:
    """The control phase: how fast memory grows when producers keep the results they read."""
    rows = [s for s in samples if s["phase"] == "kept"]
    if len(rows) < 2:
        return {"results": results, "growth_mb_per_min": None}
    span_min = (rows[-1]["t"] - rows[0]["t"]) / 60
    growth = rows[-1]["used_memory_mb"] - rows[0]["used_memory_mb"]
    return {"results": results, "growth_mb": growth, "growth_mb_per_min": growth / span_min if span_min else None}


def plot(samples: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [s["t"] for s in samples]
    rates = [0.0] + [
        (b["collected"] - a["collected"]) / max(b["t"] - a["t"], 1e-6) for a, b in itertools.pairwise(samples)
    ]
    figure, (memory_axis, rate_axis) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    memory_axis.plot(times, [s["used_memory_mb"] for s in samples], color="tab:red", label="Redis used_memory (MB)")
    depth_axis = memory_axis.twinx()
    depth_axis.plot(times, [s["queue_depth"] for s in samples], color="tab:gray", alpha=0.6, label="queue depth")
    memory_axis.set_ylabel("used_memory (MB)")
    depth_axis.set_ylabel("waiting messages")
    memory_axis.set_ylim(bottom=0)
    rate_axis.plot(times, rates, color="tab:blue")
    rate_axis.set_ylabel("results collected / s")
    rate_axis.set_xlabel("seconds")
    for name, color in (("burst", "tab:orange"), ("kept", "tab:purple")):
        spans = [s["t"] for s in samples if s["phase"] == name]
        if spans:
            for axis in (memory_axis, rate_axis):
                axis.axvspan(spans[0], spans[-1], color=color, alpha=0.15, label=f"{name} phase")
    memory_axis.legend(loc="upper left")
    depth_axis.legend(loc="upper right")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the steady phase")
    parser.add_argument("--burst-seconds", type=float, default=60.0)
    parser.add_argument("--python-producers", type=int, default=3)
    parser.add_argument("--max-queue-depth", type=int, default=20, help="the burst producer's limit")
    parser.add_argument("--kept-seconds", type=float, default=60.0, help="the control phase (results kept)")
    parser.add_argument("--quick", action="store_true", help="smoke size: 20 s steady, 10 s burst, 10 s kept")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "soak.json")
    args = parser.parse_args()
    if args.quick:
        args.minutes, args.burst_seconds, args.kept_seconds = 20 / 60, 10.0, 10.0
    return args


def producers(app: Any, batches: list[list[str]], until: float, done: Counter, errors: Counter, count: int,
              keep: bool = False) -> None:  # fmt: skip
    """`count` closed-loop Python producers until `until`; keep=True leaves their results in Redis."""
    threads = [
        threading.Thread(target=closed_loop, args=(app, batches, until, done, errors, i, keep), daemon=True)
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_phases(args: argparse.Namespace, url: str, app: Any, steady_s: float) -> dict[str, Any]:
    """Steady (Ruby and Python producers, results deleted on read), burst (QueueFull), kept (the
    control: results left in Redis), with Redis' memory sampled throughout."""
    batches = make_batches(64, BATCH_SIZE, seed=7)
    client = redis.Redis.from_url(url)
    done, errors = Counter(), Counter()
    phase, samples, stop = ["steady"], [], threading.Event()
    sampler = threading.Thread(target=sample, args=(client, time.monotonic(), done, phase, samples, stop), daemon=True)
    sampler.start()
    ruby = subprocess.Popen(
        ["ruby", str(RUBY_PRODUCER), str(steady_s), RUBY_DONE_KEY],
        env=localstack.clean_env(os.environ, REDIS_URL=url),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        producers(app, batches, time.monotonic() + steady_s, done, errors, args.python_producers)
        ruby_out, _ = ruby.communicate(timeout=RESULT_TIMEOUT_S)
    finally:
        if ruby.poll() is None:
            ruby.kill()
    phase[0] = "burst"
    burst_report = burst(app, batches, args.burst_seconds, args.max_queue_depth, done)
    time.sleep(2.0)  # two more samples after the burst, so the plot shows memory coming back
    leftover_results = sum(1 for _ in client.scan_iter("celery-task-meta-*"))
    phase[0] = "kept"
    collected_before_kept = done.value
    producers(app, batches, time.monotonic() + args.kept_seconds, done, errors, args.python_producers, keep=True)
    time.sleep(1.5)
    stop.set()
    sampler.join()
    return {
        "samples": samples,
        "ruby": json.loads(ruby_out.strip().splitlines()[-1]),
        "burst": burst_report,
        "results_left_in_redis": leftover_results,
        "python_results": collected_before_kept,
        "python_errors": errors.value,
        "kept_results": done.value - collected_before_kept,
    }


def summarise(run: dict[str, Any], steady_s: float, cores: int) -> dict[str, Any]:
    samples = run["samples"]
    window_s = min(60.0, steady_s / 4)
    first = window_mean(samples, "steady", True, window_s)
    last = window_mean(samples, "steady", False, window_s)
    steady_rows = [s for s in samples if s["phase"] == "steady"]
    steady_collected = steady_rows[-1]["collected"] - steady_rows[0]["collected"] if steady_rows else 0
    steady_span = steady_rows[-1]["t"] - steady_rows[0]["t"] if len(steady_rows) > 1 else 1.0
    return {
        "cores": cores,
        "steady_s": steady_s,
        "window_s": window_s,
        "memory_first_window_mb": first,
        "memory_last_window_mb": last,
        "memory_drift_mb": last - first,
        "memory_flat": abs(last - first) <= 50,
        "memory_peak_mb": max(s["used_memory_mb"] for s in samples),
        "steady_results_per_s": steady_collected / steady_span,
        "python_results": run["python_results"],
        "python_errors": run["python_errors"],
        "ruby": run["ruby"],
        "burst": run["burst"],
        "results_left_in_redis": run["results_left_in_redis"],
        "kept": kept_growth(samples, run["kept_results"]),
    }


def main() -> None:
    args = parse_args()
    stop_cleanly_on_term()
    steady_s = args.minutes * 60
    cores = available_cores()
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    server = localstack.start_redis(workdir / "redis")
    worker = None
    try:
        url = server.url(0)
        worker = localstack.start_worker("soak", url, workdir, os.environ, concurrency=cores)
        run = run_phases(args, url, worker.app, steady_s)
    finally:
        if worker is not None:
            worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    summary = summarise(run, steady_s, cores)
    png = args.out.with_suffix(".png")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    title = (
        f"soak: {steady_s / 60:.1f} min steady (results deleted on read), {args.burst_seconds:.0f} s burst "
        f"(max_queue_depth {args.max_queue_depth}), {args.kept_seconds:.0f} s kept (control); {cores} children"
    )
    plot(run["samples"], png, title)
    print(json.dumps(summary, indent=2))
    write_report(args.out, "soak", {"summary": summary, "samples": run["samples"]})
    print(f"plot: {png}")
    if summary["python_errors"] or summary["burst"]["failed_or_lost"] or summary["ruby"].get("errors"):
        raise SystemExit("some tasks failed or were lost")


if __name__ == "__main__":
    main()

"""Closed-loop producers against a target, and what the target's processes used meanwhile."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psutil

from benchmarks.harness.stats import percentile
from benchmarks.harness.targets import Client, Target

SAMPLE_INTERVAL_S = 0.1


@dataclass
class Sampler:
    """Peak OS threads and peak RSS of a target's processes, sampled every SAMPLE_INTERVAL_S."""

    target: Target
    peak_threads: int = 0
    peak_rss: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            threads = rss = 0
            for process in self.target.processes():
                try:
                    threads += process.num_threads()
                    rss += process.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            self.peak_threads = max(self.peak_threads, threads)
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(SAMPLE_INTERVAL_S)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds(processes: Sequence[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def pss_bytes(processes: Sequence[psutil.Process]) -> int:
    total = 0
    for process in processes:
        try:
            total += process.memory_full_info().pss
        except psutil.NoSuchProcess:
            continue
    return total


def run(target: Target, batches: list[list[str]], producers: int, redis: psutil.Process | None) -> dict:
    """Closed-loop producers send every batch once; throughput, latency and what the servers used."""
    clients = [target.client() for _ in range(producers)]
    order = itertools.count()
    latencies: list[float] = [0.0] * len(batches)
    errors: list[str] = []

    def produce(client: Client) -> None:
        while (index := next(order)) < len(batches):
            started = time.perf_counter()
            try:
                client(batches[index])
            except Exception as exc:  # noqa: BLE001 - counted and reported; the run goes on
                errors.append(f"{type(exc).__name__}: {exc}")
            latencies[index] = time.perf_counter() - started

    processes = target.processes()
    cpu_before = cpu_seconds(processes)
    redis_before = cpu_seconds([redis]) if redis else 0.0
    # The producers (this process) share the machine's cores with the servers: what they use
    # is reported too (JSON decoding of results, Celery's client side, the sampler).
    client_before = cpu_seconds([psutil.Process()])
    with Sampler(target) as sampler:
        started = time.perf_counter()
        threads = [threading.Thread(target=produce, args=(client,), daemon=True) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    processes = target.processes()
    return {
        "config": target.name,
        "producers": producers,
        "requests": len(batches),
        "sentences": sum(len(batch) for batch in batches),
        "errors": errors,
        "wall_s": wall,
        "latencies": latencies,
        "peak_os_threads": sampler.peak_threads,
        "cpu_s": cpu_seconds(processes) - cpu_before,
        "redis_cpu_s": (cpu_seconds([redis]) - redis_before) if redis else None,
        "client_cpu_s": cpu_seconds([psutil.Process()]) - client_before,
        "peak_rss_mib": sampler.peak_rss / 2**20,
        "pss_mib_after": pss_bytes(processes) / 2**20,
    }


def combine(parts: list[dict]) -> dict:
    """One table row from one or more runs of a configuration at one producer count."""
    latencies = sorted(latency for part in parts for latency in part["latencies"])
    wall = sum(part["wall_s"] for part in parts)
    requests = sum(part["requests"] for part in parts)
    errors = [error for part in parts for error in part["errors"]]
    redis_cpu = [part["redis_cpu_s"] for part in parts if part["redis_cpu_s"] is not None]
    return {
        "config": parts[0]["config"],
        "producers": parts[0]["producers"],
        "rounds": len(parts),
        "requests": requests,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": wall,
        "requests_per_s": requests / wall,
        "sentences_per_s": sum(part["sentences"] for part in parts) / wall,
        "requests_per_s_by_round": [part["requests"] / part["wall_s"] for part in parts],
        "latency_mean_s": statistics.fmean(latencies),
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p95_s": percentile(latencies, 0.95),
        "peak_os_threads": max(part["peak_os_threads"] for part in parts),
        "cpu_s": sum(part["cpu_s"] for part in parts),
        "cpu_s_per_request": sum(part["cpu_s"] for part in parts) / requests,
        "redis_cpu_s": sum(redis_cpu) if redis_cpu else None,
        "client_cpu_s": sum(part["client_cpu_s"] for part in parts),
        "peak_rss_mib": max(part["peak_rss_mib"] for part in parts),
        "pss_mib_after": parts[-1]["pss_mib_after"],
    }


def run_threads(target: Callable[..., None], count: int, indexed: bool = False) -> tuple[float, float]:
    """Run `count` producer threads on `target` (given its index if `indexed`) to the end: (start, end) times."""
    threads = [threading.Thread(target=target, args=(i,) if indexed else (), daemon=True) for i in range(count)]
    started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return started, time.time()


def per_call_us(function: Callable[[], object], seconds: float) -> float:
    """Microseconds per call of `function`, called repeatedly for `seconds` (in-process micro-benchmarks)."""
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        function()
        calls += 1
    return elapsed / calls * 1e6

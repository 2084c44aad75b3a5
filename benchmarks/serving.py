"""Serving benchmark: the HTTP hop this project replaces versus our Celery workers, side by side.

Starts every configuration once (redis-server, two FastAPI/Uvicorn services, Celery workers, a
process pool), then runs them in one sitting, alternating configurations at each load level so
drift of this shared machine hits all alike, on the same seeded 64-sentence batches:

- http-default: FastAPI + Uvicorn, sync /embed, the libraries' default threading;
- http-pinned: the same service with every native pool at 1 thread;
- celery-unpinned: our prefork worker with INFERENCE_PIN_THREADS=false (the oversubscribed control);
- celery: our prefork worker as shipped (concurrency = cores, pinned, model preloaded);
- celery-adaptive: the same with INFERENCE_ADAPTIVE_THREADS=true (idle siblings' cores lent);
- ceiling: cores x 1-thread processes calling encode directly, no transport at all;
- celery-openvino / ceiling-openvino: the same two with INFERENCE_BACKEND=openvino (the model
  exported once at the start), compared with torch in their own alternated section, plus one-text
  tasks micro-batched by the OpenVINO worker, per-child memory and fork-to-ready times.

Closed-loop producers (each waits for its answer, then sends the next) at each level; then the
oversubscription runs (per-request native threads forced to what default threading gives on
bigger hosts) and single-producer latency. Prints tables and the ratios; writes JSON.

    .venv/bin/python benchmarks/serving.py                 # the documented run, ~8 minutes here
    .venv/bin/python benchmarks/serving.py --quick         # a smoke run of every code path
    .venv/bin/python benchmarks/serving.py --runtimes-only # torch vs OpenVINO only (~3 minutes)
    .venv/bin/python benchmarks/serving.py --runtimes-only --worker-cpus 1

`--worker-cpus` confines what serves (Celery workers, main process and children; the ceiling's
processes; the HTTP servers) to those CPUs and puts this harness, its producers and redis-server
on the others, as production puts producers and Redis on other hosts. On a small machine that is
the only way to see what the serving stack itself delivers per core: with everything on the
same cores, the producers' and Redis' CPU (which the ceiling does not pay) is charged to Celery.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import itertools
import json
import multiprocessing
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import ceiling
from inference_tasks.config import Settings
from inference_tasks.cores import available_cores
from inference_tasks.defaults import DEFAULT_MODEL
from inference_tasks.ops.export import export_openvino
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 600
SERVICE_START_TIMEOUT_S = 180
SAMPLE_INTERVAL_S = 0.1
DATA = localstack.REPO_ROOT / "data" / "support_tickets.jsonl"
DEFAULT_OUT = localstack.REPO_ROOT / "benchmarks" / "results" / "serving.json"
Client = Callable[[list[str]], None]


def make_batches(count: int, size: int, seed: int) -> list[list[str]]:
    """`count` batches of `size` realistic sentences (support messages), the same for a given seed."""
    texts = [json.loads(line)["text"] for line in DATA.open(encoding="utf-8")]
    rng = random.Random(seed)
    return [rng.sample(texts, size) if size <= len(texts) else rng.choices(texts, k=size) for _ in range(count)]


class Target:
    """One serving configuration: how to start it, which processes serve, and a client per producer."""

    name: str

    def root_pids(self) -> list[int]:
        raise NotImplementedError

    def client(self) -> Client:
        raise NotImplementedError

    def wait_ready(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def processes(self) -> list[psutil.Process]:
        found = []
        for pid in self.root_pids():
            try:
                root = psutil.Process(pid)
                found += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return found


class HttpTarget(Target):
    """benchmarks/http_service.py under Uvicorn (one process, FastAPI's thread pool for sync endpoints)."""

    def __init__(self, name: str, threads: int | None, workdir: Path) -> None:
        self.name = name
        self.port = localstack.free_port()
        env = localstack.clean_env(os.environ)
        if threads is not None:
            env["BENCH_THREADS"] = str(threads)
        args = [sys.executable, "-m", "uvicorn", "benchmarks.http_service:app", "--host", "127.0.0.1"]
        args += ["--port", str(self.port), "--workers", "1", "--log-level", "warning", "--no-access-log"]
        self.log_path = workdir / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                args, cwd=localstack.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def root_pids(self) -> list[int]:
        return [self.process.pid]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVICE_START_TIMEOUT_S
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.3)

    def client(self) -> Client:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=RESULT_TIMEOUT_S)

        def call(batch: list[str]) -> None:
            connection.request("POST", "/embed", json.dumps({"texts": batch}), {"Content-Type": "application/json"})
            response = connection.getresponse()
            body = json.loads(response.read())
            if response.status != 200 or len(body["embeddings"]) != len(batch):
                raise RuntimeError(f"{self.name}: HTTP {response.status}")

        return call

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class InfinityTarget(HttpTarget):
    """A peer a user would pick instead: Infinity (infinity-emb 0.0.78, torch engine, dynamic batching)
    serving the same model files over HTTP, from its own venv (benchmarks/peers/setup_infinity.sh)."""

    def __init__(self, name: str, venv: Path, workdir: Path) -> None:
        from inference_tasks.worker.models import resolve_model_path

        self.name = name
        self.port = localstack.free_port()
        self.model = str(resolve_model_path(DEFAULT_MODEL))
        env = localstack.clean_env(os.environ, HF_HUB_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0", DO_NOT_TRACK="1")
        env.pop("PYTHONPATH", None)  # its own venv and packages only
        args = [str(venv / "bin" / "infinity_emb"), "v2", "--model-id", self.model, "--served-model-name", "minilm"]
        args += ["--engine", "torch", "--device", "cpu", "--port", str(self.port), "--no-bettertransformer"]
        self.log_path = workdir / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)

    def client(self) -> Client:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=RESULT_TIMEOUT_S)

        def call(batch: list[str]) -> None:
            request = json.dumps({"model": "minilm", "input": batch})
            connection.request("POST", "/embeddings", request, {"Content-Type": "application/json"})
            response = connection.getresponse()
            body = json.loads(response.read())
            if response.status != 200 or len(body["data"]) != len(batch):
                raise RuntimeError(f"{self.name}: HTTP {response.status}")

        return call


class CeleryTarget(Target):
    """A real `celery -A inference_tasks worker` on its own Redis database; one producer app per client."""

    def __init__(
        self,
        name: str,
        redis_url: str,
        workdir: Path,
        cores: int,
        pinned: bool,
        threads: int | None = None,
        adaptive: bool = False,
        **settings: object,
    ) -> None:
        self.name = name
        options: dict[str, object] = {"concurrency": cores, "pin_threads": str(pinned).lower(), **settings}
        if adaptive:
            options["adaptive_threads"] = "true"
        if threads is not None:
            # torch ignores OMP_NUM_THREADS above the core count; the trainer profile's thread
            # setting applies N to every pool (env and runtime) in each of the `cores` children.
            options.update(profile="trainer", trainer_threads=threads)
        self.worker = localstack.start_worker(name, redis_url, workdir, os.environ, wait_ready=False, **options)

    def root_pids(self) -> list[int]:
        return [self.worker.process.pid]

    def wait_ready(self) -> None:
        self.worker.wait_ready()

    # Result encoding the producers ask for: None is the JSON default; "f32-base64" a quarter of the bytes.
    encoding: str | None = None

    def client(self) -> Client:
        app = localstack.producer_app(self.worker.redis_url)
        kwargs = {"encoding": self.encoding} if self.encoding else {}

        def call(batch: list[str]) -> None:
            result = app.send_task(EMBED_TASK, args=[batch], kwargs=kwargs).get(timeout=RESULT_TIMEOUT_S)
            count = result["count"] if self.encoding else len(result["embeddings"])
            if count != len(batch):
                raise RuntimeError(f"{self.name}: wrong number of vectors")

        return call

    def stop(self) -> None:
        self.worker.stop()


class CeilingTarget(Target):
    """`cores` spawned processes x 1 thread, each calling encode on whole batches (benchmarks/ceiling.py)."""

    def __init__(
        self,
        name: str,
        cores: int,
        backend: str = "torch",
        cache: Path | None = None,
        cpus: frozenset[int] | None = None,
    ) -> None:
        self.name = name
        self.cores = cores
        self.pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=cores,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=ceiling.start,
            initargs=(DEFAULT_MODEL, 1, backend, str(cache) if cache else None, cpus),
        )
        self._pids: list[int] = []

    def root_pids(self) -> list[int]:
        return self._pids

    def wait_ready(self) -> None:
        pids: set[int] = set()
        deadline = time.monotonic() + SERVICE_START_TIMEOUT_S
        while len(pids) < self.cores and time.monotonic() < deadline:
            # Blocking calls keep every process busy, so the pool spawns all of them.
            futures = [self.pool.submit(_sleep_and_pid) for _ in range(self.cores * 2)]
            pids |= {future.result(timeout=SERVICE_START_TIMEOUT_S) for future in futures}
        self._pids = sorted(pids)

    def client(self) -> Client:
        def call(batch: list[str]) -> None:
            if self.pool.submit(ceiling.encode, batch).result(timeout=RESULT_TIMEOUT_S) != len(batch):
                raise RuntimeError("ceiling: wrong number of vectors")

        return call

    def stop(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _sleep_and_pid() -> int:
    time.sleep(0.2)
    return ceiling.pid()


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
        "latency_p50_s": latencies[len(latencies) // 2],
        "latency_p95_s": latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))],
        "peak_os_threads": max(part["peak_os_threads"] for part in parts),
        "cpu_s": sum(part["cpu_s"] for part in parts),
        "cpu_s_per_request": sum(part["cpu_s"] for part in parts) / requests,
        "redis_cpu_s": sum(redis_cpu) if redis_cpu else None,
        "client_cpu_s": sum(part["client_cpu_s"] for part in parts),
        "peak_rss_mib": max(part["peak_rss_mib"] for part in parts),
        "pss_mib_after": parts[-1]["pss_mib_after"],
    }


TABLE_COLUMNS = (
    ("config", "{:<22}"),
    ("producers", "{:>4}"),
    ("requests_per_s", "{:>7.2f}"),
    ("sentences_per_s", "{:>7.1f}"),
    ("latency_mean_s", "{:>7.2f}"),
    ("latency_p50_s", "{:>7.2f}"),
    ("latency_p95_s", "{:>7.2f}"),
    ("peak_os_threads", "{:>6}"),
    ("cpu_s", "{:>7.1f}"),
    ("peak_rss_mib", "{:>7.0f}"),
    ("vs_http_default", "{:>6.2f}"),
    ("vs_ceiling", "{:>6.2f}"),
)
HEADER = "config                  prod   req/s  sent/s  mean s   p50 s   p95 s threads   cpu s RSS MiB  /http /ceil"


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}\n{HEADER}")
    for row in rows:
        cells = []
        for key, fmt in TABLE_COLUMNS:
            value = row.get(key)
            cells.append(fmt.format(value) if value is not None else " " * len(fmt.format(0)))
        print(" ".join(cells) + ("  ERRORS: " + str(row["errors"]) if row["errors"] else ""))


def add_ratios(rows: list[dict]) -> None:
    """Throughput ratios against http-default and ceiling measured at the same producer count."""
    by_level: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_level.setdefault(row["producers"], {})[row["config"]] = row
    for row in rows:
        level = by_level[row["producers"]]
        for reference, key in (("http-default", "vs_http_default"), ("ceiling", "vs_ceiling")):
            if reference in level:
                row[key] = row["requests_per_s"] / level[reference]["requests_per_s"]


def run_threads(target: Callable[..., None], count: int, indexed: bool = False) -> tuple[float, float]:
    """Run `count` producer threads on `target` (given its index if `indexed`) to the end: (start, end) times."""
    threads = [threading.Thread(target=target, args=(i,) if indexed else (), daemon=True) for i in range(count)]
    started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return started, time.time()


def stop_cleanly_on_term() -> None:
    """SIGTERM (timeout, kill) unwinds like Ctrl-C, so the finally blocks stop every server started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def rotated(items: Sequence, shift: int) -> list:
    shift %= len(items)
    return [*items[shift:], *items[:shift]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="10,20,40", help="concurrent producers for the main comparison")
    parser.add_argument("--requests", type=int, default=32, help="requests per run below 40 producers")
    parser.add_argument("--requests-40", type=int, default=48, help="requests per run at 40 producers or more")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds at the first level")
    parser.add_argument("--batch", type=int, default=64, help="sentences per request")
    parser.add_argument("--oversub", default="8,16,24", help="forced per-request threads ('' to skip)")
    parser.add_argument("--oversub-requests", type=int, default=16, help="requests per oversubscription run")
    parser.add_argument("--low-load-requests", type=int, default=6, help="sequential requests, one producer")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke size: every path, a few tiny requests")
    parser.add_argument("--runtimes-only", action="store_true", help="only the torch vs OpenVINO section")
    parser.add_argument("--runtime-rounds", type=int, default=3, help="alternated rounds of the runtime section")
    parser.add_argument(
        "--runtime-requests", type=int, default=64, help="requests per run in the runtime section (~4 s each)"
    )
    parser.add_argument("--one-text-tasks", type=int, default=4096, help="one-text tasks in the burst")
    parser.add_argument(
        "--runtime-encoding", default="f32-base64", help="result encoding in the runtime section ('' for JSON)"
    )
    parser.add_argument(
        "--worker-cpus", default="", help="CPUs for what serves, e.g. '1' (the harness and Redis get the rest)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.quick:
        args.levels, args.requests, args.requests_40, args.batch = "2", 4, 4, 4
        args.oversub, args.oversub_requests, args.low_load_requests = "3", 2, 2
        args.runtime_rounds, args.runtime_requests, args.one_text_tasks = 1, 4, 16
    stop_cleanly_on_term()
    levels = [int(level) for level in args.levels.split(",")]
    oversub = [int(t) for t in args.oversub.split(",") if t.strip()]
    cores = available_cores()
    worker_cpus = parse_cpus(args.worker_cpus)
    if worker_cpus:
        harness_cpus = os.sched_getaffinity(0) - worker_cpus
        if not harness_cpus or not worker_cpus <= os.sched_getaffinity(0):
            sys.exit(f"--worker-cpus {args.worker_cpus}: must leave this harness at least one of its CPUs")
        os.sched_setaffinity(0, harness_cpus)  # this thread, redis-server and every later thread here
        cores = len(worker_cpus)
        print(f"serving on CPUs {sorted(worker_cpus)}; harness and Redis on {sorted(harness_cpus)}", flush=True)
    place = partial(on_cpus, worker_cpus)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    server = localstack.start_redis(work / "redis")
    redis_process = psutil.Process(server.process.pid)
    databases = itertools.count(1)
    targets: dict[str, Target] = {}
    main_rows: list[dict] = []
    oversub_rows: list[dict] = []
    low_rows: list[dict] = []
    runtime: dict = {}
    try:
        cache = work / "models"
        export = export_openvino(Settings(model_cache=str(cache)))
        print(f"OpenVINO export in {export.seconds:.1f} s", flush=True)
        targets["celery"] = place(CeleryTarget, "celery", server.url(next(databases)), work, cores, True)
        targets["celery-openvino"] = place(
            CeleryTarget,
            "celery-openvino",
            server.url(next(databases)),
            work,
            cores,
            True,
            backend="openvino",
            model_cache=cache,
        )
        targets["ceiling"] = CeilingTarget("ceiling", cores, cpus=worker_cpus)
        targets["ceiling-openvino"] = CeilingTarget("ceiling-openvino", cores, "openvino", cache, cpus=worker_cpus)
        if (PEER_VENV / "bin" / "infinity_emb").exists():
            targets["infinity"] = place(InfinityTarget, "infinity", PEER_VENV, work)
        else:
            print(f"no Infinity peer ({PEER_VENV}): run benchmarks/peers/setup_infinity.sh to compare", flush=True)
        if args.runtimes_only:
            oversub = []
        else:
            place(start_http_and_torch_variants, targets, server, databases, work, cores, oversub)
        for target in targets.values():
            target.wait_ready()
        warm = make_batches(cores * 2, args.batch, seed=args.seed + 1)
        for target in targets.values():  # every child loaded and warm before anything is timed
            run(target, warm, cores * 2, None)
        startup_s = time.perf_counter() - started
        print(f"{len(targets)} configurations up and warm in {startup_s:.0f} s on {cores} cores", flush=True)
        runtime = runtimes_section(targets, args, levels[0], redis_process)
        if not args.runtimes_only:
            main_rows, oversub_rows, low_rows = torch_sections(targets, args, levels, oversub, redis_process)
    finally:
        for target in targets.values():
            try:
                target.stop()
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                print(f"stopping {target.name}: {exc}", file=sys.stderr)
        server.process.terminate()
        server.process.wait(timeout=10)

    summary = summarise(main_rows, oversub_rows, low_rows, levels[0])
    summary["lines"] += runtime.get("lines", [])
    summary["figures"].update(runtime.get("figures", {}))
    print("\nTargets and ratios (same run):")
    for line in summary["lines"]:
        print(f"  {line}")
    total_s = time.perf_counter() - started
    print(f"\ntotal {total_s:.0f} s")
    errors = sum(len(row["errors"]) if isinstance(row["errors"], list) else row["errors"]
                 for row in [*main_rows, *oversub_rows, *low_rows, *runtime.get("rows", [])])  # fmt: skip
    errors += runtime.get("one_text", {}).get("errors", 0)
    out = args.out
    if args.runtimes_only and args.out == DEFAULT_OUT:
        out = DEFAULT_OUT.with_name("runtimes-worker-cpus.json" if worker_cpus else "runtimes.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "command": " ".join(["benchmarks/serving.py", *sys.argv[1:]]),
                "cores": cores,
                "worker_cpus": sorted(worker_cpus),
                "batch_sentences": args.batch,
                "seed": args.seed,
                "startup_s": startup_s,
                "total_s": total_s,
                "errors": errors,
                "main": main_rows,
                "oversubscription": oversub_rows,
                "low_load": low_rows,
                "runtimes": runtime,
                "summary": summary,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"results: {out}")
    if errors:
        sys.exit(f"{errors} requests failed")


def parse_cpus(text: str) -> frozenset[int]:
    """'1' or '2,3' or '2-3' as a CPU set; '' as none."""
    cpus: set[int] = set()
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def on_cpus(cpus: frozenset[int], start: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `start` (which launches processes) with this thread confined to `cpus`, so what it forks or
    spawns inherits them; then give the thread its CPUs back. No CPUs: just `start`."""
    if not cpus:
        return start(*args, **kwargs)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return start(*args, **kwargs)
    finally:
        os.sched_setaffinity(0, saved)


def start_http_and_torch_variants(
    targets: dict[str, Target], server: Any, databases: Any, work: Path, cores: int, oversub: list[int]
) -> None:
    """Everything of the main comparison besides celery and ceiling (started at once: imports overlap)."""
    targets["http-default"] = HttpTarget("http-default", None, work)
    targets["http-pinned"] = HttpTarget("http-pinned", 1, work)
    targets["celery-unpinned"] = CeleryTarget("celery-unpinned", server.url(next(databases)), work, cores, False, None)
    targets["celery-adaptive"] = CeleryTarget(
        "celery-adaptive", server.url(next(databases)), work, cores, True, adaptive=True
    )
    for threads in oversub:
        name = f"http-default-{threads}t"
        targets[name] = HttpTarget(name, threads, work)
        name = f"celery-unpinned-{threads}t"
        targets[name] = CeleryTarget(name, server.url(next(databases)), work, cores, False, threads)


def torch_sections(
    targets: dict[str, Target], args: argparse.Namespace, levels: list[int], oversub: list[int], redis_process: Any
) -> tuple[list[dict], list[dict], list[dict]]:
    """The main comparison (HTTP vs Celery vs ceiling, torch), oversubscription, and low load."""
    main_configs = ["http-default", "http-pinned", "celery-unpinned", "celery", "ceiling"]
    main_rows = []
    for shift, level in enumerate(levels):
        count = args.requests_40 if level >= 40 else args.requests
        batches = make_batches(count, args.batch, args.seed)
        # The adaptive-threads experiment only where it matters: the first level and low load.
        configs = main_configs + (["celery-adaptive"] if shift == 0 else [])
        rounds = args.rounds if shift == 0 else 1
        parts: dict[str, list[dict]] = {name: [] for name in configs}
        for round_index in range(rounds):
            # Rotated at each level and reversed every other round: no configuration always
            # runs first or last while the machine drifts.
            order = rotated(configs, shift + round_index)
            for name in order if round_index % 2 == 0 else order[::-1]:
                redis = redis_process if name.startswith("celery") else None
                parts[name].append(run(targets[name], batches, level, redis))
                rate = parts[name][-1]["requests"] / parts[name][-1]["wall_s"]
                print(f"  {name} at {level} producers: {rate:.2f} req/s", flush=True)
        main_rows += [combine(parts[name]) for name in configs]
    add_ratios(main_rows)
    order = [*main_configs, "celery-adaptive"]
    main_rows.sort(key=lambda row: (row["producers"], order.index(row["config"])))
    print_table(f"Main comparison ({args.batch} sentences per request)", main_rows)

    oversub_rows = []
    if oversub:
        batches = make_batches(args.oversub_requests, args.batch, args.seed)
        level = levels[0]
        names = ["http-default", "celery", "http-pinned", "celery-unpinned"]
        names += [f"{kind}-{t}t" for t in oversub for kind in ("http-default", "celery-unpinned")]
        for name in names:
            redis = redis_process if name.startswith("celery") else None
            oversub_rows.append(combine([run(targets[name], batches, level, redis)]))
            print(f"  {name} at {level} producers: {oversub_rows[-1]['requests_per_s']:.2f} req/s", flush=True)
        add_ratios(oversub_rows)
        print_table(f"Oversubscription: forced per-request threads, {level} producers", oversub_rows)

    low_rows = []
    batches = make_batches(args.low_load_requests, args.batch, args.seed)
    for name in ("http-default", "http-pinned", "celery", "celery-unpinned", "celery-adaptive", "ceiling"):
        redis = redis_process if name.startswith("celery") else None
        low_rows.append(combine([run(targets[name], batches, 1, redis)]))
    add_ratios(low_rows)
    print_table("Low load: one producer, one request at a time", low_rows)
    return main_rows, oversub_rows, low_rows


RUNTIME_CONFIGS = ["celery", "celery-openvino", "ceiling", "ceiling-openvino"]
PEER_VENV = Path(__file__).resolve().parent / "peers" / ".venv-infinity"
CHILD_READY = re.compile(r"child ready ([\d.]+) s after fork")
PRELOADED = re.compile(r"model preloaded in the main process in ([\d.]+) s")


def runtimes_section(targets: dict[str, Target], args: argparse.Namespace, level: int, redis_process: Any) -> dict:
    """torch vs OpenVINO, through Celery and in-process, alternated on the same 64-text batches; then
    one-text tasks micro-batched by the OpenVINO worker; per-child memory and fork-to-ready times."""
    batches = make_batches(args.runtime_requests, args.batch, args.seed)
    for name in ("celery", "celery-openvino"):  # both alike: compact results, as a bulk producer asks
        targets[name].encoding = args.runtime_encoding  # type: ignore[attr-defined]
    configs = [*RUNTIME_CONFIGS, *(["infinity"] if "infinity" in targets else [])]
    parts: dict[str, list[dict]] = {name: [] for name in configs}
    for round_index in range(args.runtime_rounds):
        order = rotated(configs, round_index)
        for name in order if round_index % 2 == 0 else order[::-1]:
            redis = redis_process if name.startswith("celery") else None
            parts[name].append(run(targets[name], batches, level, redis))
            print(f"  {name} at {level} producers: {sentences_per_s(parts[name][-1]):.0f} sentences/s", flush=True)
    rows = [combine(parts[name]) for name in configs]
    for row in rows:
        row["sentences_per_s"] = row["requests_per_s"] * args.batch
    encoding = args.runtime_encoding or "json"
    print_table(
        f"Runtimes: torch vs OpenVINO ({args.batch} sentences per request, {level} producers, {encoding})", rows
    )
    by_name = {row["config"]: row for row in rows}
    from benchmarks.microbatch import burst as microbatch_burst  # it imports this module

    openvino_worker = targets["celery-openvino"].worker  # type: ignore[attr-defined]
    texts = [json.loads(line)["text"] for line in DATA.open()]
    one_texts = [texts[i % len(texts)] for i in range(args.one_text_tasks)]
    one_text = microbatch_burst(openvino_worker, one_texts, level)
    one_text["sentences_per_s"] = one_text["tasks"] / one_text["wall_s"]
    children = {name: child_facts(targets[name]) for name in ("celery", "celery-openvino")}  # type: ignore[arg-type]
    rate = {name: row["sentences_per_s"] for name, row in by_name.items()}
    figures = {
        "openvino_vs_torch_celery": rate["celery-openvino"] / rate["celery"],
        "openvino_celery_vs_ceiling": rate["celery-openvino"] / rate["ceiling-openvino"],
        "openvino_vs_torch_ceiling": rate["ceiling-openvino"] / rate["ceiling"],
        "openvino_one_text_vs_batched": one_text["sentences_per_s"] / rate["celery-openvino"],
    }
    # The same ratio round by round: both ran minutes apart at most, so the host's drift (this
    # shared machine's speed moves by several percent within minutes) cancels within a round.
    per_round = [
        sentences_per_s(served) / sentences_per_s(ceiling)
        for served, ceiling in zip(parts["celery-openvino"], parts["ceiling-openvino"], strict=True)
    ]
    figures["openvino_celery_vs_ceiling_per_round"] = per_round
    lines = [
        f"celery-openvino / celery (torch): {figures['openvino_vs_torch_celery']:.2f}x sentences/s (target >= 2.5)",
        f"celery-openvino / ceiling-openvino: {figures['openvino_celery_vs_ceiling']:.3f} (target >= 0.95; "
        f"per round {', '.join(f'{ratio:.3f}' for ratio in per_round)})",
        f"ceiling-openvino / ceiling (torch): {figures['openvino_vs_torch_ceiling']:.2f}x",
        f"one-text tasks micro-batched on OpenVINO: {one_text['sentences_per_s']:.0f} sentences/s, "
        f"{figures['openvino_one_text_vs_batched']:.2f}x the {args.batch}-text batches (target >= 0.6)",
    ]
    for name, facts in children.items():
        lines.append(
            f"{name}: children RSS {', '.join(f'{mib:.0f}' for mib in facts['rss_mib'])} MiB, "
            f"fork to ready {', '.join(f'{s:.2f}' for s in facts['ready_s'])} s, model preload in the main "
            f"process {', '.join(f'{s:.2f}' for s in facts['preload_s'])} s, precision {facts['precision']}"
        )
    one_text.pop("latencies", None)
    single = single_sentences(targets, args, level, redis_process, [c for c in configs if not c.startswith("ceiling")])
    for row in single:
        lines.append(
            f"single sentences, {level} producers: {row['config']} {row['requests_per_s']:.0f}/s, "
            f"p50 {row['latency_p50_s'] * 1000:.0f} ms, p95 {row['latency_p95_s'] * 1000:.0f} ms"
        )
    if "infinity" in by_name:
        figures["celery_openvino_vs_infinity"] = rate["celery-openvino"] / rate["infinity"]
        ratio = figures["celery_openvino_vs_infinity"]
        lines.append(f"celery-openvino / infinity ({args.batch}-text requests): {ratio:.2f}x")
    for name in ("celery", "celery-openvino"):
        targets[name].encoding = None  # type: ignore[attr-defined]
    return {
        "encoding": encoding,
        "rows": rows,
        "single_sentences": single,
        "one_text": one_text,
        "children": children,
        "figures": figures,
        "lines": lines,
    }


def single_sentences(
    targets: dict[str, Target], args: argparse.Namespace, level: int, redis_process: Any, configs: list[str]
) -> list[dict]:
    """One text per request, `level` closed-loop producers, alternated: what an app embedding one
    title at a time sees (Celery micro-batches them in the worker, Infinity in its server)."""
    texts = make_batches(args.runtime_requests * 4, 1, args.seed + 7)
    parts: dict[str, list[dict]] = {name: [] for name in configs}
    for round_index in range(2 if args.runtime_rounds > 1 else 1):
        order = rotated(configs, round_index)
        for name in order if round_index % 2 == 0 else order[::-1]:
            redis = redis_process if name.startswith("celery") else None
            parts[name].append(run(targets[name], texts, level, redis))
    rows = [combine(parts[name]) for name in configs]
    print_table(f"Single sentences ({level} producers)", rows)
    return rows


def sentences_per_s(part: dict) -> float:
    return part["sentences"] / part["wall_s"]


def child_facts(target: CeleryTarget) -> dict:
    """Each child's RSS and precision (the workers' own report) and fork-to-ready times (their log)."""
    from inference_tasks.worker.control import COMMAND

    [reply] = target.worker.app.control.broadcast(COMMAND, reply=True, timeout=5)
    [report] = reply.values()
    return {
        "rss_mib": [child["rss_bytes"] / 2**20 for child in report["children"]],
        "precision": sorted({child["precision"] or "?" for child in report["children"]}),
        "ready_s": [float(ready) for ready in CHILD_READY.findall(target.worker.log())],
        "preload_s": [float(seconds) for seconds in PRELOADED.findall(target.worker.log())],
    }


def summarise(main_rows: list[dict], oversub_rows: list[dict], low_rows: list[dict], level: int) -> dict:
    """The issue's targets as ratios from this run."""

    def row(rows: list[dict], config: str, producers: int) -> dict | None:
        return next((r for r in rows if r["config"] == config and r["producers"] == producers), None)

    lines = []
    figures: dict[str, float] = {}
    celery, ceiling_row, http = (row(main_rows, name, level) for name in ("celery", "ceiling", "http-default"))
    if celery and ceiling_row and http:
        figures["celery_vs_ceiling"] = celery["requests_per_s"] / ceiling_row["requests_per_s"]
        figures["celery_vs_http_default"] = celery["requests_per_s"] / http["requests_per_s"]
        best_http = max(
            r["requests_per_s"] for r in main_rows if r["producers"] == level and r["config"].startswith("http")
        )
        figures["celery_vs_best_http"] = celery["requests_per_s"] / best_http
        lines.append(f"celery / ceiling at {level} producers: {figures['celery_vs_ceiling']:.3f} (target >= 0.95)")
        lines.append(
            f"celery / http-default at {level}: {figures['celery_vs_http_default']:.3f}; "
            f"/ best HTTP: {figures['celery_vs_best_http']:.3f}"
        )
    for r in oversub_rows:
        if re.search(r"-\d+t$", r["config"]):
            pinned = row(oversub_rows, "celery" if r["config"].startswith("celery") else "http-pinned", level)
            if pinned:
                key = f"{r['config']}_vs_pinned"
                figures[key] = r["requests_per_s"] / pinned["requests_per_s"]
                lines.append(
                    f"{r['config']}: {figures[key]:.2f}x the pinned throughput, p95 {r['latency_p95_s']:.2f} s "
                    f"vs {pinned['latency_p95_s']:.2f} s, {r['peak_os_threads']} threads vs {pinned['peak_os_threads']}"
                )
    low_celery, low_http = row(low_rows, "celery", 1), row(low_rows, "http-default", 1)
    if low_celery and low_http:
        ratio = low_celery["latency_mean_s"] / low_http["latency_mean_s"]
        figures["low_load_latency_celery_vs_http_default"] = ratio
        lines.append(
            f"one producer: celery {low_celery['latency_mean_s']:.2f} s vs http-default "
            f"{low_http['latency_mean_s']:.2f} s mean latency ({ratio:.2f}x)"
        )
    adaptive, adaptive_low = row(main_rows, "celery-adaptive", level), row(low_rows, "celery-adaptive", 1)
    if adaptive and celery and adaptive_low and low_celery:
        figures["adaptive_vs_celery_throughput"] = adaptive["requests_per_s"] / celery["requests_per_s"]
        figures["adaptive_vs_celery_low_load_latency"] = adaptive_low["latency_mean_s"] / low_celery["latency_mean_s"]
        lines.append(
            f"adaptive threads: throughput at {level} producers {figures['adaptive_vs_celery_throughput']:.2f}x "
            f"pinned, one-producer latency {adaptive_low['latency_mean_s']:.2f} s vs "
            f"{low_celery['latency_mean_s']:.2f} s ({figures['adaptive_vs_celery_low_load_latency']:.2f}x)"
        )
    return {"figures": figures, "lines": lines}


if __name__ == "__main__":
    main()

"""What serves in a benchmark: how to start it, which processes serve, and a client per producer."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from benchmarks.harness import ceiling
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.routing import EMBED_TASK
from tests.support import localstack

RESULT_TIMEOUT_S = 600
SERVICE_START_TIMEOUT_S = 180
# Infinity's own virtual environment (benchmarks/peers/setup_infinity.sh), if set up.
PEER_VENV = Path(__file__).resolve().parents[1] / "peers" / ".venv-infinity"

Client = Callable[[list[str]], None]


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
    """harness/http_service.py under Uvicorn (one process, FastAPI's thread pool for sync endpoints)."""

    def __init__(self, name: str, threads: int | None, workdir: Path) -> None:
        self.name = name
        self.port = localstack.free_port()
        env = localstack.clean_env(os.environ)
        if threads is not None:
            env["BENCH_THREADS"] = str(threads)
        args = [sys.executable, "-m", "uvicorn", "benchmarks.harness.http_service:app", "--host", "127.0.0.1"]
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
        from inference_tasks.worker.runtimes.model_files import resolve_model_path

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
    """`cores` spawned processes x 1 thread, each calling encode on whole batches (harness/ceiling.py);
    `precision` as INFERENCE_OPENVINO_PRECISION for the OpenVINO backend."""

    def __init__(
        self,
        name: str,
        cores: int,
        backend: str = "torch",
        cache: Path | None = None,
        cpus: frozenset[int] | None = None,
        precision: str = "auto",
    ) -> None:
        self.name = name
        self.cores = cores
        self.pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=cores,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=ceiling.start,
            initargs=(DEFAULT_MODEL, 1, backend, str(cache) if cache else None, cpus, precision),
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

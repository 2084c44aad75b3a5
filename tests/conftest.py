"""Fixtures: a real redis-server per test session, real `celery worker` processes, producer apps.

Why not celery.contrib.pytest's celery_worker: it runs the worker inside the test process with
the solo or threads pool, so it cannot show what this project is about (prefork children,
their native threads, a child dying). Workers here are the real command an operator runs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from inference_tasks import create_app
from inference_tasks.app import InferenceApp
from inference_tasks.config import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER_READY_TIMEOUT_S = 120
WORKER_STOP_TIMEOUT_S = 30
REDIS_DATABASES = 64
SUCCEEDED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] succeeded")
# Settings that would leak from the developer's shell into test workers.
_LEAKY_ENV_PREFIXES = ("INFERENCE_", "REDIS_URL", "CELERY_", "OMP_", "MKL_", "OPENBLAS_NUM", "RAYON_")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**overrides: str) -> dict[str, str]:
    """The test process's environment without project or thread settings, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LEAKY_ENV_PREFIXES)}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


@dataclass
class TlsFiles:
    cert: Path
    key: Path
    ca: Path


@dataclass
class RedisServer:
    host: str
    port: int
    process: subprocess.Popen
    password: str | None = None
    scheme: str = "redis"

    def url(self, db: int = 0) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"{self.scheme}://{auth}{self.host}:{self.port}/{db}"


def start_redis(
    workdir: Path,
    password: str | None = None,
    tls: TlsFiles | None = None,
    appendonly: bool = False,
    port: int | None = None,
) -> RedisServer:
    """A redis-server on a loopback port (a free one unless given); persistence (AOF) only if asked."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed: .ci/run must install it (apt-get install redis-server)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    args = [binary, "--bind", "127.0.0.1", "--save", "", "--dir", str(workdir)]
    args += ["--appendonly", "yes", "--appendfsync", "everysec"] if appendonly else ["--appendonly", "no"]
    args += ["--databases", str(REDIS_DATABASES), "--logfile", str(workdir / "redis.log")]
    if password:
        args += ["--requirepass", password]
    if tls:
        args += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(tls.cert)]
        args += ["--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"]
    else:
        args += ["--port", str(port)]
    server = RedisServer("127.0.0.1", port, subprocess.Popen(args), password, "rediss" if tls else "redis")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((server.host, server.port)) == 0:
                return server
        if server.process.poll() is not None:
            break
        time.sleep(0.05)
    server.process.kill()
    raise RuntimeError(f"redis-server did not start; see {workdir / 'redis.log'}")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the whole test session."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.process.terminate()
    server.process.wait(timeout=10)


_databases = itertools.count(1)


@pytest.fixture(scope="session")
def fresh_redis_url(redis_server: RedisServer) -> Callable[[], str]:
    """Builder: the URL of a Redis database no other test uses, so workers never steal tasks."""

    def build() -> str:
        db = next(_databases)
        assert db < REDIS_DATABASES, "raise REDIS_DATABASES"
        return redis_server.url(db)

    return build


def producer_app(redis_url: str, **settings: object) -> InferenceApp:
    """A producer-side app pointing at `redis_url`, as a Python client would build it."""
    return create_app(Settings(redis_url=redis_url, **settings))  # type: ignore[arg-type]


@dataclass
class WorkerProcess:
    """A running `celery worker` command and the producer app that talks to it."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    redis_url: str
    app: InferenceApp
    process: subprocess.Popen | None = None

    def launch(self, wait_ready: bool = True) -> WorkerProcess:
        """Start (or start again) the command, appending to its log; wait for 'ready' if asked."""
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        while wait_ready and " ready." not in self.log()[offset:]:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"worker {self.name} did not become ready:\n{self.log()[-4000:]}")
            time.sleep(0.2)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def successes(self) -> Counter[str]:
        """How many times each task id succeeded, from the worker's own log lines."""
        return Counter(SUCCEEDED.findall(self.log()))

    def child_pids(self) -> list[int]:
        import psutil

        return [child.pid for child in psutil.Process(self.process.pid).children()]

    def stop(self, timeout: float = WORKER_STOP_TIMEOUT_S) -> int:
        """Warm shutdown (SIGTERM), then SIGKILL for the whole process group if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # orphans, if any
        return self.process.returncode

    def kill(self) -> None:
        """kill -9 of the worker and every child at once: a host or container dying."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def start_worker(
    tmp_path_factory: pytest.TempPathFactory, fresh_redis_url: Callable[[], str]
) -> Iterator[Callable[..., WorkerProcess]]:
    """Builder: start a real `celery -A inference_tasks worker` with INFERENCE_* settings as keyword
    arguments (e.g. concurrency=2, pin_threads="false"), wait until it is ready, stop it at the end.
    """
    started: list[WorkerProcess] = []
    names = itertools.count(1)

    def start(
        *,
        queues: str = "inference",
        pool: str = "prefork",
        include: str | None = None,
        redis_url: str | None = None,
        wait_ready: bool = True,
        **settings: object,
    ) -> WorkerProcess:
        name = f"test{next(names)}"
        url = redis_url or fresh_redis_url()
        env = clean_env(REDIS_URL=url)
        env.update({f"INFERENCE_{key.upper()}": str(value) for key, value in settings.items()})
        args = [sys.executable, "-m", "celery", "-A", "inference_tasks", "worker", "-n", f"{name}@%h"]
        args += ["-Q", queues, "--pool", pool, "-l", "info", "--without-mingle", "--without-gossip"]
        if include:
            args += ["--include", include]
        log_path = tmp_path_factory.mktemp("workers") / f"{name}.log"
        worker = WorkerProcess(name, args, env, log_path, url, producer_app(url))
        started.append(worker)
        return worker.launch(wait_ready)

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def inference_worker(start_worker: Callable[..., WorkerProcess]) -> WorkerProcess:
    """The shipped inference profile: prefork, 2 children, pinned, the real default model."""
    return start_worker(concurrency=2)


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


@contextlib.contextmanager
def running_flower(flower_args: list[str], redis_url: str, **env: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """`celery -A inference_tasks flower <flower_args> --port=<free>`, yielded once /healthcheck answers."""
    import urllib.request

    port = free_port()
    args = [sys.executable, "-m", "celery", "-A", "inference_tasks", "flower", *flower_args, f"--port={port}"]
    flower = subprocess.Popen(
        args, cwd=REPO_ROOT, env=clean_env(REDIS_URL=redis_url, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2):
                    break
            except OSError:
                if flower.poll() is not None:
                    raise RuntimeError(f"flower exited: {flower.stdout.read().decode()[-2000:]}") from None
                assert time.monotonic() < deadline, "flower did not answer"
                time.sleep(0.3)
        yield flower, port
    finally:
        flower.terminate()
        flower.wait(timeout=20)

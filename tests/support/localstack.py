"""Start and stop redis-server and `celery worker` processes on this machine (tests, benchmarks).

The commands are the ones an operator runs; nothing here is used by producers or workers.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from inference_tasks import create_app
from inference_tasks.app import InferenceApp
from inference_tasks.config import Settings
from tests.support import tiers
from tests.support.waiting import poll_until

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_READY_TIMEOUT_S = 120
WORKER_STOP_TIMEOUT_S = 30
REDIS_DATABASES = 128
SUCCEEDED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] succeeded")
# The test-only tasks (tests/support/worker_probes.py) are all named "tests.*"; a worker that includes them
# accepts those names from the wire too (screening refuses any name it was not told about).
INCLUDED_TASK_NAMES = "tests.*"
# Settings that would leak from the caller's shell into started processes.
_LEAKY_ENV_PREFIXES = ("INFERENCE_", "REDIS_URL", "CELERY_", "OMP_", "MKL_", "OPENBLAS_NUM", "RAYON_")
# Passed on all the same: how an idle OpenMP thread waits changes no result and no thread count. The
# suite sets it to PASSIVE (tests/conftest.py), so that its two pytest processes' exports, fits and
# distillations do not spin on the cores the other one needs (docs/testing.md, "Speed").
_PASSED_THROUGH = ("OMP_WAIT_POLICY",)
# The runtime every started process serves unless a test or benchmark names another (backend=...): torch,
# whose vectors the suite compares with sentence-transformers' own to 1e-5. The default (auto) has its
# own tests (tests/worker/test_auto_runtime.py); backend=None starts a process with no runtime setting.
STARTED_BACKEND = "torch"


class MissingProgram(RuntimeError):
    """A program these helpers start is not installed."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(base: Mapping[str, str], **overrides: str) -> dict[str, str]:
    """`base` (the caller's environment) without project or thread settings, plus `overrides`."""
    env = {k: v for k, v in base.items() if k in _PASSED_THROUGH or not k.startswith(_LEAKY_ENV_PREFIXES)}
    env["INFERENCE_BACKEND"] = STARTED_BACKEND
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
    log_path: Path | None = None

    def url(self, db: int = 0) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"{self.scheme}://{auth}{self.host}:{self.port}/{db}"


def start_redis(
    workdir: Path,
    password: str | None = None,
    tls: TlsFiles | None = None,
    appendonly: bool = False,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> RedisServer:
    """A redis-server on a loopback port (a free one unless given); persistence (AOF) only if asked;
    `extra_args` are further redis-server options (e.g. "--maxmemory", "32mb")."""
    tiers.refuse_in_unit_tier("a redis-server")
    binary = shutil.which("redis-server")
    if binary is None:
        raise MissingProgram("redis-server is not installed (apt-get install redis-server)")
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    args = [binary, "--bind", "127.0.0.1", "--save", "", "--dir", str(workdir)]
    args += ["--appendonly", "yes", "--appendfsync", "everysec"] if appendonly else ["--appendonly", "no"]
    args += ["--databases", str(REDIS_DATABASES), "--logfile", str(workdir / "redis.log")]
    args += list(extra_args)
    if password:
        args += ["--requirepass", password]
    if tls:
        args += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(tls.cert)]
        args += ["--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"]
    else:
        args += ["--port", str(port)]
    server = RedisServer(
        "127.0.0.1", port, subprocess.Popen(args), password, "rediss" if tls else "redis", workdir / "redis.log"
    )

    def accepts_connections() -> bool:
        with socket.socket() as sock:
            if sock.connect_ex((server.host, server.port)) == 0:
                return True
        return server.process.poll() is not None  # exited: stop waiting, fail below

    if poll_until(accepts_connections, 15) and server.process.poll() is None:
        return server
    server.process.kill()
    raise RuntimeError(f"redis-server did not start; see {workdir / 'redis.log'}")


def start_replica(
    primary: RedisServer,
    workdir: Path,
    wait_in_sync: bool = True,
    tls: TlsFiles | None = None,
    extra_args: tuple[str, ...] = (),
    port: int | None = None,
) -> RedisServer:
    """A redis-server replicating `primary`; with `wait_in_sync`, returned once its link is up. With
    `tls` it listens on TLS only and replicates over TLS."""
    over_tls = ("--tls-replication", "yes") if tls else ()
    replica = start_redis(
        workdir, tls=tls, port=port, extra_args=("--replicaof", primary.host, str(primary.port), *over_tls, *extra_args)
    )
    if wait_in_sync:
        import redis

        follower = redis.Redis(host=replica.host, port=replica.port, socket_timeout=2, **tls_client_options(tls))
        if not poll_until(lambda: follower.info("replication").get("master_link_status") == "up", 30):
            raise RuntimeError(f"replica of {primary.port} never came in sync; see {workdir / 'redis.log'}")
    return replica


def tls_client_options(tls: TlsFiles | None) -> dict[str, object]:
    """redis-py keywords for a test's client on a server started with `tls` (none without)."""
    return {"ssl": True, "ssl_ca_certs": str(tls.ca)} if tls else {}


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
    _log_offset: int = 0

    def launch(self, wait_ready: bool = True) -> WorkerProcess:
        """Start (or start again) the command, appending to its log; wait for 'ready' if asked."""
        tiers.refuse_in_unit_tier("a worker")
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.wait_ready() if wait_ready else self

    def wait_ready(self) -> WorkerProcess:
        """Wait until this launch logged 'ready.'; stop it and raise with its log if it never does."""

        def ready_or_exited() -> bool:
            return " ready." in self.log()[self._log_offset :] or self.process.poll() is not None

        if not poll_until(ready_or_exited, WORKER_READY_TIMEOUT_S, poll_s=0.2) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError(f"worker {self.name} did not become ready:\n{self.log()[-4000:]}")
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


# The commands the docs give, as they are (Celery's defaults: gossip and mingle on), logging at INFO
# so that their 'ready.' is seen: README's plain Celery command, and the presets the Procfile,
# systemd, compose and Kubernetes run.
PLAIN_WORKER = (sys.executable, "-m", "celery", "-A", "inference_tasks", "worker", "-l", "info")
PRESET_WORKER = (sys.executable, "-m", "inference_tasks.ops.cli", "worker")
PRESET_TRAINER = (sys.executable, "-m", "inference_tasks.ops.cli", "trainer")


def worker_command(name: str, queues: str | None, pool: str, include: str | None = None) -> list[str]:
    """`celery -A inference_tasks worker` as an operator would run it, named and without gossip; with
    no `queues`, the served model's own (`inference` and `inference.<alias>` for the default model)."""
    args = [sys.executable, "-m", "celery", "-A", "inference_tasks", "worker", "-n", f"{name}@%h"]
    args += ["-Q", queues] if queues else []
    args += ["--pool", pool, "-l", "info", "--without-mingle", "--without-gossip"]
    return args + (["--include", include] if include else [])


def producer_app(redis_url: str, **settings: object) -> InferenceApp:
    """A producer-side app pointing at `redis_url`, as a Python client would build it."""
    return create_app(Settings(redis_url=redis_url, **settings))  # type: ignore[arg-type]


def start_worker(
    name: str,
    redis_url: str,
    log_dir: Path,
    base_env: Mapping[str, str],
    *,
    queues: str | None = None,
    pool: str = "prefork",
    include: str | None = None,
    wait_ready: bool = True,
    extra_env: Mapping[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    **settings: object,
) -> WorkerProcess:
    """Start a worker with INFERENCE_* settings given as keywords (concurrency=2, pin_threads="false").

    `extra_env` adds other variables (e.g. OMP_NUM_THREADS for an unpinned worker in a benchmark);
    `command` replaces the tests' own worker command (PLAIN_WORKER, PRESET_TRAINER: `queues`, `pool`
    and `include` are then not used).
    """
    if include and "extra_tasks" not in settings:
        settings["extra_tasks"] = INCLUDED_TASK_NAMES
    env = clean_env(base_env, REDIS_URL=redis_url, **(extra_env or {}))
    for key, value in settings.items():  # None: the setting unset, as a user who never names it
        if value is None:
            env.pop(f"INFERENCE_{key.upper()}", None)
        else:
            env[f"INFERENCE_{key.upper()}"] = str(value)
    log_dir.mkdir(parents=True, exist_ok=True)
    worker = WorkerProcess(
        name,
        list(command) if command else worker_command(name, queues, pool, include),
        env,
        log_dir / f"{name}.log",
        redis_url,
        # A Sentinel URL needs the master name on the producer side too.
        producer_app(redis_url, **{key: settings[key] for key in ("redis_sentinel_master",) if key in settings}),
    )
    return worker.launch(wait_ready)

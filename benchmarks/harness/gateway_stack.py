"""A redis-server, one worker as shipped (the default runtime) and one `inference-tasks gateway` on it, for the
gateway's benchmarks; stopped in reverse order on the way out."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.workload import REPO_ROOT
from tests.support.localstack import free_port, start_redis, start_worker


@dataclass
class GatewayStack:
    redis_url: str
    port: int
    gateway_pid: int
    workdir: Path


@contextlib.contextmanager
def gateway_stack(name: str, gateway_args: list[str], **gateway_env: str) -> Iterator[GatewayStack]:
    """The stack, the gateway started with `gateway_args` and INFERENCE_GATEWAY_* in `gateway_env`."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    server = start_redis(work / "redis")
    url = server.url(0)
    worker = start_worker(f"{name}-bench", url, work, dict(os.environ), backend="auto")
    port = free_port()
    env = {**os.environ, "REDIS_URL": url, "PYTHONPATH": str(REPO_ROOT), **gateway_env}
    gateway = subprocess.Popen([sys.executable, "-m", "inference_tasks.ops.cli", "gateway", "--port", str(port),
                                "--log-level", "warning", *gateway_args], env=env)  # fmt: skip
    try:
        wait_for_port(port, gateway)
        yield GatewayStack(url, port, gateway.pid, work)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        worker.stop()
        server.process.terminate()
        server.process.wait(timeout=10)


def wait_for_port(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the gateway exited")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("the gateway did not listen within 60 s")

"""Stock Celery tools with nothing but a broker URL see the fleet (broker/bindings.py): `celery inspect`
and `celery control` as operators' shells run them, and Flower as its official image runs it (`celery
flower` configured by CELERY_BROKER_URL), all without `-A`, our settings or our transport. The worker
answers, and its log then holds no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.local import answering_flower
from tests.support.localstack import free_port
from tests.support.operator_tools import flower_api
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker


def stock_env(**overrides: str) -> dict[str, str]:
    """The caller's environment without anything of this project's (settings, PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENCE_", "CELERY_", "PYTHON", "REDIS_"))}
    return {**env, **overrides}


def stock_celery(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `celery` command, isolated (-I: no PYTHONPATH, no current directory on the path)."""
    command = [sys.executable, "-I", "-m", "celery", *args]
    return subprocess.run(command, cwd=cwd, env=stock_env(**env), capture_output=True, text=True, timeout=60)


@contextmanager
def stock_flower(broker_url: str, cwd: Path) -> Iterator[int]:
    """`celery flower` as Flower's official image runs it: the broker from CELERY_BROKER_URL, no app."""
    port = free_port()
    command = [sys.executable, "-I", "-m", "celery", "flower", f"--port={port}"]
    env = stock_env(CELERY_BROKER_URL=broker_url, FLOWER_UNAUTHENTICATED_API="true")
    with answering_flower(command, port, cwd, env):
        yield port


def test_a_stock_celery_pings_inspects_and_controls_the_workers(inference_worker, tmp_path):
    url = inference_worker.redis_url
    ping = stock_celery([f"--broker={url}", "inspect", "ping", "--timeout=1"], tmp_path)
    assert ping.returncode == 0 and "pong" in ping.stdout, ping.stdout + ping.stderr
    queues = stock_celery([f"--broker={url}", "inspect", "active_queues", "--timeout=1"], tmp_path)
    assert queues.returncode == 0 and "'name': 'inference'" in queues.stdout, queues.stdout + queues.stderr
    heartbeat = stock_celery([f"--broker={url}", "control", "heartbeat", "--timeout=1"], tmp_path)
    assert heartbeat.returncode == 0, heartbeat.stdout + heartbeat.stderr
    assert "Traceback" not in inference_worker.log()


def test_flower_as_its_official_image_runs_it_lists_the_workers(inference_worker, tmp_path):
    with stock_flower(inference_worker.redis_url, tmp_path) as port:
        workers: dict = {}

        def listed() -> bool:
            workers.update(flower_api(port, "/api/workers?refresh=1"))  # type: ignore[arg-type]
            return bool(workers)

        wait_until(listed, 30, "flower to list the worker", poll_s=0.5)
    assert any(name.startswith(inference_worker.name) for name in workers), workers
    assert "Traceback" not in inference_worker.log()

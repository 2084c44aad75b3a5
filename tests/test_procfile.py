"""The Procfile's process types, and its Flower line started for real without torch."""

from __future__ import annotations

import shlex
import subprocess
import time
import urllib.request
from pathlib import Path

from conftest import REPO_ROOT, clean_env, free_port

VENV_BIN = Path(__file__).resolve().parent.parent / ".venv" / "bin"


def procfile() -> dict[str, list[str]]:
    lines = (REPO_ROOT / "Procfile").read_text().splitlines()
    entries = [line.split(":", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {name.strip(): shlex.split(command) for name, command in entries}


def test_procfile_starts_the_whole_stack_with_the_two_profiles():
    """redis, worker (inference queue, prefork), trainer (training queue, solo) and flower."""
    processes = procfile()
    assert set(processes) == {"redis", "worker", "trainer", "flower"}
    worker, trainer = processes["worker"], processes["trainer"]
    assert worker[:4] == ["celery", "-A", "inference_tasks", "worker"]
    assert worker[worker.index("-Q") + 1] == "inference" and worker[worker.index("--pool") + 1] == "prefork"
    assert trainer[trainer.index("-Q") + 1] == "training" and trainer[trainer.index("--pool") + 1] == "solo"


def test_procfile_flower_runs_against_the_configured_redis_without_torch(redis_server):
    """The flower line starts, answers /healthcheck, and never maps libtorch into its process."""
    command = procfile()["flower"]
    port = free_port()
    command = [arg if not arg.startswith("--port=") else f"--port={port}" for arg in command]
    command[0] = str(VENV_BIN / "celery") if (VENV_BIN / "celery").exists() else command[0]
    flower = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=clean_env(REDIS_URL=redis_server.url(0)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2) as reply:
                    body = reply.read().decode()
                break
            except OSError:
                assert flower.poll() is None, "flower exited"
                assert time.monotonic() < deadline, "flower did not answer"
                time.sleep(0.3)
        assert body == "OK"
        maps = Path(f"/proc/{flower.pid}/maps").read_text()
        assert "libtorch" not in maps
    finally:
        flower.terminate()
        flower.wait(timeout=20)

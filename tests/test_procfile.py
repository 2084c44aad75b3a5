"""The Procfile's process types, and its Flower line started for real without torch."""

from __future__ import annotations

import shlex
from pathlib import Path

from conftest import REPO_ROOT, running_flower


def procfile() -> dict[str, list[str]]:
    lines = (REPO_ROOT / "Procfile").read_text().splitlines()
    entries = [line.split(":", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {name.strip(): shlex.split(command) for name, command in entries}


def test_procfile_starts_the_whole_stack_with_the_two_profiles():
    """redis, worker (inference queue, prefork), trainer (training queue, one child, trainer profile), flower."""
    processes = procfile()
    assert set(processes) == {"redis", "worker", "trainer", "flower"}
    worker, trainer = processes["worker"], processes["trainer"]
    assert worker[:4] == ["celery", "-A", "inference_tasks", "worker"]
    assert worker[worker.index("-Q") + 1] == "inference" and worker[worker.index("--pool") + 1] == "prefork"
    assert trainer[:2] == ["env", "INFERENCE_PROFILE=trainer"]
    assert trainer[trainer.index("-Q") + 1] == "training" and trainer[trainer.index("--concurrency") + 1] == "1"


def test_procfile_flower_runs_against_the_configured_redis_without_torch(redis_server):
    """The flower line's options start Flower, which answers /healthcheck and never maps libtorch."""
    command = procfile()["flower"]
    assert command[:4] == ["celery", "-A", "inference_tasks", "flower"]
    options = [arg for arg in command[4:] if not arg.startswith("--port=")]
    with running_flower(options, redis_server.url(0)) as (flower, _):
        assert "libtorch" not in Path(f"/proc/{flower.pid}/maps").read_text()

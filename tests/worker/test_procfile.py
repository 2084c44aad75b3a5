"""The Procfile's process types, and its Flower line started for real without torch."""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path

import pytest

from inference_tasks.routing import TRAINING_QUEUE, WORKER_INFO_TASK
from tests.support.local import clean_env, running_flower
from tests.support.localstack import REPO_ROOT, WorkerProcess, producer_app


def procfile() -> dict[str, list[str]]:
    lines = (REPO_ROOT / "Procfile").read_text().splitlines()
    entries = [line.split(":", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {name.strip(): shlex.split(command) for name, command in entries}


def test_procfile_starts_the_whole_stack_with_the_two_profiles():
    """redis, a worker pool per model (the default and the multilingual one) and the trainer (the CLI
    presets), flower, the metrics exporter."""
    processes = procfile()
    assert set(processes) == {"redis", "worker", "worker-multilingual", "trainer", "flower", "metrics"}
    assert processes["metrics"][:2] == ["inference-tasks", "metrics"]
    assert processes["worker"] == ["inference-tasks", "worker"]
    assert processes["worker-multilingual"][:4] == ["inference-tasks", "worker", "--model", "multilingual"]
    assert processes["trainer"] == ["inference-tasks", "trainer"]


@pytest.mark.worker
def test_procfile_worker_and_trainer_lines_start_the_two_profiles(fresh_redis_url, tmp_path):
    """The worker line runs pinned inference children on queue inference; the trainer line one child
    with INFERENCE_TRAINER_THREADS threads on queue training (checked with worker_info on each queue)."""
    url = fresh_redis_url()
    bin_dir = Path(sys.executable).parent
    started = []
    try:
        for name in ("worker", "trainer"):
            command = [str(bin_dir / procfile()[name][0]), *procfile()[name][1:], "-n", f"procfile-{name}@%h"]
            env = clean_env(REDIS_URL=url, INFERENCE_CONCURRENCY="2", INFERENCE_TRAINER_THREADS="2")
            process = WorkerProcess(name, command, env, tmp_path / f"{name}.log", url, producer_app(url))
            started.append(process.launch(wait_ready=False))  # both start at once: imports dominate
        for process in started:
            process.wait_ready()
        app = started[0].app
        inference = app.send_task(WORKER_INFO_TASK).get(timeout=120)
        training = app.send_task(WORKER_INFO_TASK, queue=TRAINING_QUEUE).get(timeout=120)
        trainer_children = started[1].child_pids()
    finally:
        for process in started:  # both warm shutdowns at once
            if process.process.poll() is None:
                process.process.send_signal(signal.SIGTERM)
        for process in started:
            process.stop()
    assert (inference["profile"], inference["torch_threads"]) == ("inference", 1)
    assert inference["hostname"].startswith("procfile-worker@")
    assert (training["profile"], training["torch_threads"]) == ("trainer", 2)
    assert training["hostname"].startswith("procfile-trainer@")
    assert trainer_children == [training["pid"]]


def test_procfile_flower_runs_against_the_configured_redis_without_torch(redis_server):
    """The flower line's options start Flower, which answers /healthcheck and never maps libtorch."""
    command = procfile()["flower"]
    assert command[:4] == ["celery", "-A", "inference_tasks", "flower"]
    options = [arg for arg in command[4:] if not arg.startswith("--port=")]
    with running_flower(options, redis_server.url(0)) as (flower, _):
        assert "libtorch" not in Path(f"/proc/{flower.pid}/maps").read_text()

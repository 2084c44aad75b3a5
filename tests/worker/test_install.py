"""`pip install .` alone, in a fresh virtual environment, gives a working `inference-tasks` CLI.

Every module the package imports must be a declared base dependency: this catches one that
only arrives through an extra (Flower brought prometheus-client; transformers brought rich).
The commands run from a directory outside the checkout, so they import the installed copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.support.localstack import REPO_ROOT
from tests.support.lockfile import read_lock
from tests.support.operator_tools import exporter, scrape

COMMANDS = (
    "worker", "trainer", "doctor", "status", "metrics", "embed", "classify", "export-model", "distil-model", "probe"
)  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with this package installed from the source tree, base dependencies only."""
    root = tmp_path_factory.mktemp("fresh-venv")
    # A copy of what the package is built from, so the build leaves nothing in the checkout.
    source = root / "source"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO_ROOT / "inference_tasks", source / "inference_tasks", ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    # The lock's versions as pip constraints (no hashes: a plain `pip install .` resolves the base
    # dependencies only, under them), so this install takes what the suite tests.
    locked = read_lock((REPO_ROOT / "requirements" / "dev.lock").read_text())
    (source / "constraints.txt").write_text("".join(f"{name}=={version}\n" for name, version in locked.items()))
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "-c", "constraints.txt", "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "venv" / "bin"


def run(bin_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/root"), **env}
    return subprocess.run(
        [bin_dir / "inference-tasks", *args], cwd=bin_dir, env=environ, capture_output=True, text=True, timeout=120
    )


@pytest.mark.worker
@pytest.mark.long
@pytest.mark.timeout(660)
def test_every_command_answers_help_from_a_plain_install(installed):
    listed = run(installed, "--help")
    assert listed.returncode == 0, listed.stderr
    for command in COMMANDS:
        assert f"  {command} " in listed.stdout, f"{command} missing from --help"
        done = run(installed, command, "--help")
        assert done.returncode == 0, f"{command} --help: {done.stderr}"
        assert "Usage:" in done.stdout
    # The installed copy answered, not the checkout.
    where = subprocess.run(
        [installed / "python", "-c", "import inference_tasks, json; print(json.dumps(inference_tasks.__file__))"],
        cwd=installed,
        capture_output=True,
        text=True,
        check=True,
    )
    assert not json.loads(where.stdout).startswith(str(REPO_ROOT / "inference_tasks"))
    extras = subprocess.run(
        [installed / "python", "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    names = {package["name"].lower() for package in json.loads(extras.stdout)}
    assert "flower" not in names and "pytest" not in names  # base dependencies only


@pytest.mark.worker
@pytest.mark.long
def test_status_and_metrics_work_from_a_plain_install(installed, fresh_redis_url):
    url = fresh_redis_url()
    status = run(installed, "status", REDIS_URL=url)
    assert status.returncode == 0, status.stderr
    assert "inference" in status.stdout
    with exporter(url, command=(str(installed / "inference-tasks"),), cwd=installed) as port:
        metrics = scrape(port)
    assert metrics[("inference_redis_up", ())] == 1
    # The OpenVINO runtime is an extra: without it, export-model says how to install it.
    export = run(installed, "export-model", "--backend", "openvino")
    assert export.returncode == 1 and "inference-tasks[openvino]" in export.stderr, export.stderr
    # So is model2vec's distillation: distil-model says which extra brings it.
    distil = run(installed, "distil-model", "minilm")
    assert distil.returncode == 1 and "inference-tasks[static]" in distil.stderr, distil.stderr
    doctor = run(installed, "doctor", "--skip-model", REDIS_URL=url)
    assert "OK  redis: reachable" in doctor.stdout, doctor.stdout + doctor.stderr
    assert "workers: no worker answered" in doctor.stdout  # it ran every check and found no worker
    assert doctor.returncode == 1

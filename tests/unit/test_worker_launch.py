"""The presets' launcher (ops/worker_launch.py): Celery's own worker command for this app, without the
umbrella command's imports. That the presets start a real worker is test_procfile's."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT

# What `celery.bin.celery` brings and a worker never runs: Flower (a `celery.commands` plugin, with
# tornado), amqp's REPL (click_repl, prompt_toolkit), the umbrella itself.
UMBRELLA_ONLY = ("celery.bin.celery", "flower", "tornado", "click_repl", "prompt_toolkit")

BUILD = f"""
import json, sys
from inference_tasks.ops.worker_launch import celery_worker_command
from inference_tasks.app import is_inference_app
worker, context = celery_worker_command()
print(json.dumps({{
    "command": worker.name,
    "our_app": is_inference_app(context.app),
    "no_color": context.no_color,
    "umbrella_modules": sorted(m for m in sys.modules if m.split(".")[0] in {UMBRELLA_ONLY!r}
                               or m.startswith("celery.bin.celery")),
}}))
"""


def build(**env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", BUILD], cwd=REPO_ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_worker_command_comes_with_this_app_and_without_the_umbrella_commands_imports():
    """Celery's `worker` command, its context holding this package's app, and none of Flower, tornado,
    amqp's REPL or the umbrella command imported (~0.2 s of a cold start)."""
    made = build()
    assert (made["command"], made["our_app"], made["no_color"]) == ("worker", True, False)
    assert made["umbrella_modules"] == []


def test_no_color_is_read_from_the_environment_as_the_umbrella_reads_it():
    assert build(NO_COLOR="1")["no_color"] is True
    assert build(NO_COLOR="0")["no_color"] is False

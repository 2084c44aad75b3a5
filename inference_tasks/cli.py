"""`inference-tasks`: presets over Celery's own CLI, so Procfiles and people start the right profile.

Each preset replaces this process with `celery -A inference_tasks worker ...` (exec, not a child):
signals reach Celery directly, so TERM stays a warm shutdown. Extra arguments are passed through
and, given later on the command line, override the preset's (e.g. `--concurrency 4`).
"""

from __future__ import annotations

import os
import sys

import click

from inference_tasks.routing import INFERENCE_QUEUE, TRAINING_QUEUE

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h"]}


def exec_celery_worker(preset: list[str], extra: tuple[str, ...], environment: dict[str, str]) -> None:
    """Replace this process with the Celery worker command."""
    os.environ.update(environment)
    argv = [sys.executable, "-m", "celery", "-A", "inference_tasks", "worker", *preset, *extra]
    sys.stdout.flush()
    os.execv(sys.executable, argv)


@click.group()
def main() -> None:
    """Celery workers that embed and classify texts, one native thread per child."""


@main.command(context_settings=PASS_THROUGH)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Inference profile: queue `inference`, prefork, INFERENCE_CONCURRENCY children of one thread."""
    preset = ["-Q", INFERENCE_QUEUE, "--pool", "prefork", "-n", "inference@%h", "-l", "info"]
    exec_celery_worker(preset, celery_args, {"INFERENCE_PROFILE": "inference"})


@main.command(context_settings=PASS_THROUGH)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def trainer(celery_args: tuple[str, ...]) -> None:
    """Trainer profile: queue `training`, one prefork child using INFERENCE_TRAINER_THREADS threads."""
    preset = ["-Q", TRAINING_QUEUE, "--pool", "prefork", "--concurrency", "1", "-n", "trainer@%h", "-l", "info"]
    exec_celery_worker(preset, celery_args, {"INFERENCE_PROFILE": "trainer"})


if __name__ == "__main__":
    main()

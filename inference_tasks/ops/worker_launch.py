"""Run Celery's `worker` command in this process for this package's app, without Celery's umbrella command.

Why: `celery -A inference_tasks worker` imports the umbrella command (`celery.bin.celery`) first, and
with it every other subcommand (amqp's REPL brings prompt_toolkit) and every `celery.commands` plugin
installed beside it: Flower's whole web application, tornado included. That is ~0.2 s of each worker's
cold start spent on code the worker never runs (docs/benchmarks-log.md, "Cold start per runtime"). The
`worker` click command is the one the umbrella runs; `run_worker` gives it the context the umbrella's
callback builds for `-A inference_tasks` (the app, the app's user options, NO_COLOR, the CELERY_WORKER_
environment prefix). The presets (`inference-tasks worker` / `trainer`) start workers this way;
`celery -A inference_tasks worker` stays supported and starts the same worker, a little later.
Pinned in docs/upstream.md and tests/unit/test_upstream_canary.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

DETACH_FLAGS = ("-D", "--detach")
TRUE_WORDS = {"1", "true", "t", "yes", "y", "on"}


def celery_worker_argv(arguments: Sequence[str]) -> list[str]:
    """The same worker as the umbrella command would start it (what `--detach` re-executes)."""
    return [sys.executable, "-m", "celery", "-A", "inference_tasks", "worker", *arguments]


def celery_worker_command() -> tuple[Any, Any]:
    """Celery's `worker` click command with this app's user options, and the context object the
    umbrella command's callback would give it (what `-A inference_tasks` and NO_COLOR make)."""
    from celery.bin.base import CLIContext, consume_preload_options
    from celery.bin.worker import worker

    from inference_tasks.app import app

    worker.params.extend(app.user_options.get("worker", []))
    preload = app.user_options.get("preload", ())
    if preload:
        worker.params.extend(preload)
        worker.callback = consume_preload_options(worker.callback)
    no_color = os.environ.get("NO_COLOR", "").strip().lower() in TRUE_WORDS
    return worker, CLIContext(app=app, no_color=no_color, workdir=None, quiet=False)


def run_worker(arguments: Sequence[str]) -> NoReturn:
    """Start the worker with Celery's own `worker` command and `arguments`; exits with its exit code.

    `--detach` re-executes through the umbrella command instead: Celery's detach re-runs
    `python -m celery` with this process's argv, which must name the app."""
    if any(flag in arguments for flag in DETACH_FLAGS):
        sys.stdout.flush()
        os.execv(sys.executable, celery_worker_argv(arguments))
    from celery import maybe_patch_concurrency

    maybe_patch_concurrency(["celery", "worker", *arguments])  # eventlet/gevent pools patch first, as celery does
    worker, context = celery_worker_command()
    worker.main(args=list(arguments), prog_name="celery worker", obj=context, auto_envvar_prefix="CELERY_WORKER")
    raise SystemExit(0)  # click's standalone mode exits itself; this is never reached

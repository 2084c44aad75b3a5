"""`inference-tasks`: worker presets for Procfiles and people, and the operator's tools.

`worker` / `trainer` start the right profile; `doctor`, `status` and `metrics` look at a running
fleet; `embed FILE` / `classify FILE` push a whole file through it. Nothing heavy is imported
until a command needs it (`doctor` loads the model; the others never import torch).

Each preset becomes Celery's worker in this same process (`ops/worker_launch.py`: Celery's `worker`
command for `-A inference_tasks`, without the umbrella command's imports), not a child: signals reach
Celery directly, so TERM stays a warm shutdown. Extra arguments are passed through and, given later
on the command line, override the preset's (e.g. `--concurrency 4`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from inference_tasks.ops.gateway_command import gateway_command
from inference_tasks.ops.model_commands import distil_model_command, export_model_command, served_model
from inference_tasks.ops.probe import probe_command
from inference_tasks.ops.pull import pull_command
from inference_tasks.routing import INFERENCE_QUEUE, TRAINING_QUEUE

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h"]}


def become_celery_worker(preset: list[str], extra: tuple[str, ...], environment: dict[str, str]) -> None:
    """Turn this process into the Celery worker (the app reads `environment` when it first configures)."""
    from inference_tasks.ops.worker_launch import run_worker

    os.environ.update(environment)
    run_worker([*preset, *extra])


@click.group()
def main() -> None:
    """Celery workers that embed and classify texts, one native thread per child."""


main.add_command(probe_command)
main.add_command(gateway_command)
main.add_command(pull_command)
main.add_command(export_model_command)
main.add_command(distil_model_command)


@main.command()
@click.option("--producer-trains", is_flag=True, help="Let inference-producer push to the training queues too.")
@click.option("--db", default=0, show_default=True, help="The Redis database of REDIS_URL (pub/sub names carry it).")
def acl(producer_trains: bool, db: int) -> None:
    """Print a Redis ACL file: inference-producer, -worker, -trainer and -operator with only what each
    needs (passwords from INFERENCE_ACL_PASSWORD_<ROLE>, else generated and printed once on stderr)."""
    from inference_tasks.ops.acl import acl_file

    made = acl_file(os.environ, producer_trains, db)
    click.echo(made.text, nl=False)
    for role, password in made.generated.items():
        click.echo(f"inference-{role} password (generated; shown once): {password}", err=True)


@main.command(context_settings=PASS_THROUGH)
@click.option(
    "--model", default=None, help="The catalogue alias to serve (default: INFERENCE_MODEL, else the default)."
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(model: str | None, celery_args: tuple[str, ...]) -> None:
    """Inference profile for one model: its queues (`inference` and `inference.<alias>` for the default
    model, `inference.<alias>` for another), prefork, INFERENCE_CONCURRENCY children of one thread."""
    settings, environment = served_model(model)
    alias = settings.served_model.alias
    queues = settings.catalogue.queues_of(alias)
    node = "inference@%h" if INFERENCE_QUEUE in queues else f"inference-{alias}@%h"
    preset = ["-Q", ",".join(queues), "--pool", "prefork", "-n", node, "-l", "info"]
    become_celery_worker(preset, celery_args, {**environment, "INFERENCE_PROFILE": "inference"})


@main.command(context_settings=PASS_THROUGH)
@click.option(
    "--model", default=None, help="The catalogue alias to train for (default: INFERENCE_MODEL, else the default)."
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def trainer(model: str | None, celery_args: tuple[str, ...]) -> None:
    """Trainer profile for one model: its training queues (`training` and `training.<alias>` for the
    default model, `training.<alias>` for another), one prefork child using INFERENCE_TRAINER_THREADS threads."""
    settings, environment = served_model(model)
    alias = settings.served_model.alias
    queues = settings.catalogue.queues_of(alias, TRAINING_QUEUE)
    node = "trainer@%h" if TRAINING_QUEUE in queues else f"trainer-{alias}@%h"
    preset = ["-Q", ",".join(queues), "--pool", "prefork", "--concurrency", "1", "-n", node, "-l", "info"]
    become_celery_worker(preset, celery_args, {**environment, "INFERENCE_PROFILE": "trainer"})


def _app() -> Any:
    from inference_tasks.app import app

    return app


@main.command()
@click.option("--skip-model", is_flag=True, help="Do not load the model here (it imports torch: seconds).")
@click.option("--timeout", default=2.0, show_default=True, help="Seconds to wait for workers' replies.")
def doctor(skip_model: bool, timeout: float) -> None:
    """Check Redis, the model and every live worker's thread budget; exit 1 on any problem."""
    from rich.console import Console

    from inference_tasks.ops.doctor import run_doctor

    sys.exit(run_doctor(_app(), Console(), check_the_model=not skip_model, timeout=timeout))


@main.command()
@click.option("--timeout", default=1.0, show_default=True, help="Seconds to wait for workers' replies.")
@click.option("--failures", default=10, show_default=True, help="How many recent failures to show.")
def status(timeout: float, failures: int) -> None:
    """Queues and their depths, workers online, recent failures."""
    from rich.console import Console

    from inference_tasks.ops.status import show_status

    sys.exit(show_status(_app(), Console(), timeout, failures))


@main.command()
@click.option("--since", default="24h", show_default=True, help="How far back: hours or days, as 24h or 7d.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def usage(since: str, as_json: bool) -> None:
    """The gateway's usage per tenant and model, summed across its replicas: requests, texts, tokens, cached
    texts, refusals by reason (tenant names only, never keys)."""
    from rich.console import Console

    from inference_tasks.ops.usage import show_usage

    try:
        show_usage(_app().settings, since, as_json, Console())
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@main.command()
@click.option("--address", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=9808, show_default=True, help="Port of /metrics.")
@click.option("--timeout", default=1.0, show_default=True, help="Seconds a scrape waits for workers' replies.")
def metrics(address: str, port: int, timeout: float) -> None:
    """Serve Prometheus metrics: queue depths, unacked, dead letters, per-child threads, recycles."""
    from inference_tasks.ops.metrics import serve

    click.echo(f"serving http://{address}:{port}/metrics", err=True)
    serve(_app(), address, port, timeout)


def _bulk_options(function: Any) -> Any:
    function = click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))(function)
    function = click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        required=True,
        help="Results, one JSON line per text in input order (.jsonl); embed also takes .npy.",
    )(function)
    function = click.option("--batch-size", default=64, show_default=True, help="Texts per task.")(function)
    function = click.option("--in-flight", default=8, show_default=True, help="Tasks waiting at a time.")(function)
    function = click.option(
        "--max-queue-depth",
        default=200,
        show_default=True,
        help="Send only while the inference queue holds fewer waiting messages (0: never wait).",
    )(function)
    function = click.option("--restart", is_flag=True, help="Overwrite the output instead of resuming it.")(function)
    function = click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for one task.")(
        function
    )
    return function


@main.command()
@_bulk_options
def embed(
    source: Path, output: Path, batch_size: int, in_flight: int, max_queue_depth: int, restart: bool, timeout: float
) -> None:
    """Embed every text of SOURCE (JSONL or one text per line) through the workers."""
    _run_bulk("embed", source, output, batch_size, in_flight, max_queue_depth, restart, timeout, None)


@main.command()
@_bulk_options
@click.option("-l", "--label", "labels", multiple=True, required=True, help="A candidate label (repeat).")
def classify(
    source: Path, output: Path, batch_size: int, in_flight: int, max_queue_depth: int, restart: bool, timeout: float,
    labels: tuple[str, ...],
) -> None:  # fmt: skip
    """Classify every text of SOURCE zero-shot over the given labels."""
    _run_bulk("classify", source, output, batch_size, in_flight, max_queue_depth, restart, timeout, list(labels))


def _run_bulk(
    kind: str, source: Path, output: Path, batch_size: int, in_flight: int, max_queue_depth: int, restart: bool,
    timeout: float, labels: list[str] | None,
) -> None:  # fmt: skip
    from tqdm import tqdm

    from inference_tasks.ops import bulk
    from inference_tasks.producer import ProducerError

    app = _app()
    try:
        bulk.check_batch_size(batch_size, app.settings)
        items = bulk.read_items(source, app.settings.max_text_chars)
        to_npy = output.suffix == ".npy"
        if to_npy and kind != "embed":
            raise bulk.BulkInputError(".npy output holds embeddings only; use .jsonl for classify")
        if restart:
            output.unlink(missing_ok=True)
        done = 0 if to_npy else bulk.completed_lines(output, items)
        vectors: list[list[float]] = []
        with contextlib.ExitStack() as stack:
            sink = None if to_npy else stack.enter_context(open(output, "a", encoding="utf-8"))
            bar = stack.enter_context(tqdm(total=len(items), initial=done, unit="text", desc=kind))

            def write(records: list[dict[str, Any]]) -> None:
                if sink is None:
                    vectors.extend(record["embedding"] for record in records)
                    return
                sink.write("".join(json.dumps(record) + "\n" for record in records))
                sink.flush()

            bulk.run(
                app, kind, items[done:], write, batch_size, in_flight, labels, timeout, bar.update, max_queue_depth
            )
        if to_npy:
            import numpy as np

            np.save(output, np.asarray(vectors, dtype=np.float32))
    except (bulk.BulkInputError, ProducerError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{len(items)} texts -> {output} ({done} already done by an earlier run)", err=True)


if __name__ == "__main__":
    main()

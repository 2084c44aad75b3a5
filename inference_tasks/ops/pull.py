"""`inference-tasks pull-model ALIAS|ID[@REVISION]`: fetch a hub model into the Hugging Face cache, at deploy time.

The one command that uses the network (an image build, an init container, a deploy step): workers
resolve the same cache offline and refuse to start, naming this command, when the model is not there
(hub.py). A catalogue alias pulls its entry's pinned revision; an id takes `@revision` or `--revision`.
"""

from __future__ import annotations

import os
import sys

import click

from inference_tasks.hub import hub_reference, parse_reference

# Offline switches a deploy environment may carry for the workers; this command is the exception.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def reference_of(name: str, revision: str | None, environ: dict[str, str]) -> str:
    """The hub reference `<id>[@<revision>]` that `name` (a catalogue alias or a hub id) stands for."""
    from inference_tasks.config import load_settings
    from inference_tasks.config.checks import ConfigError

    try:
        catalogue = load_settings(environ).catalogue
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    if name in catalogue.models:
        source = catalogue.models[name].source
        if parse_reference(source) is None:
            raise click.ClickException(f"model {name!r} is {source!r}, not a hub id: there is nothing to pull")
        if revision is not None:
            raise click.ClickException(f"model {name!r} pins its revision in the catalogue; drop --revision")
        return source
    parsed = parse_reference(name)
    if parsed is None:
        known = ", ".join(catalogue.models)
        raise click.ClickException(f"{name!r} is neither a catalogue alias ({known}) nor a hub id")
    if parsed[1] is not None and revision is not None:
        raise click.ClickException(f"{name!r} names its revision; drop --revision")
    return hub_reference(parsed[0], parsed[1] or revision)


@click.command("pull-model")
@click.argument("name")
@click.option("--revision", default=None, help="With a hub id: the branch, tag or commit to pull (default: main).")
def pull_command(name: str, revision: str | None) -> None:
    """Download a hub model (a catalogue alias whose source is a hub id, or an id) into the Hugging Face
    cache (HF_HOME / HF_HUB_CACHE), where workers read it offline. Prints the snapshot's directory."""
    reference = reference_of(name, revision, dict(os.environ))
    for variable in OFFLINE_VARIABLES:
        os.environ.pop(variable, None)  # before huggingface_hub reads its constants
    from huggingface_hub import snapshot_download

    repo_id, pinned = parse_reference(reference) or (reference, None)
    try:
        path = snapshot_download(repo_id, revision=pinned)
    except Exception as error:  # noqa: BLE001 - any failure to fetch is the message
        click.echo(f"pull-model: {repo_id}{'@' + pinned if pinned else ''} could not be fetched: {error}", err=True)
        sys.exit(1)
    click.echo(f"pulled {reference}: {path}")

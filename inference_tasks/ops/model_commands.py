"""The commands that prepare a model for its runtime at deploy time, offline, into the model cache:
`export-model` (OpenVINO IR, measured precision) and `distil-model` (a static model2vec model)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click


def served_model(model: str | None) -> tuple[Any, dict[str, str]]:
    """The Settings serving INFERENCE_MODEL (or --model), its catalogue checked, and the environment that
    selects it; a bad catalogue or alias is a clear error, not a traceback."""
    from inference_tasks.config import load_settings
    from inference_tasks.config.checks import ConfigError

    environment = {"INFERENCE_MODEL": model} if model else {}
    settings = load_settings({**os.environ, **environment})
    try:
        settings.models  # noqa: B018 - reads and checks the catalogue now
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    return settings, environment


@click.command("export-model")
@click.option(
    "--backend",
    type=click.Choice(["auto", "openvino", "ctranslate2"]),
    default="auto",
    show_default=True,
    help="auto: export for every CPU runtime installed, time them all here and record the fastest at each "
    "request size (what INFERENCE_BACKEND=auto, the default, serves); openvino or ctranslate2: that one alone.",
)
@click.option(
    "--model", default=None, help="The catalogue alias to export (default: INFERENCE_MODEL, else the default)."
)
@click.option(
    "--precision",
    type=click.Choice(["auto", "f32", "int8"]),
    default="auto",
    show_default=True,
    help="OpenVINO only. auto: both exports, then each precision this CPU runs (f32, bf16, int8) timed here with "
    "one thread and gated against torch; the fastest that passes is what INFERENCE_OPENVINO_PRECISION=auto "
    "serves. f32: the full-precision IR alone; int8: that IR quantized by NNCF (INFERENCE_OPENVINO_PRECISION=int8).",
)
@click.option("--force", is_flag=True, help="Export (and measure) again even if a complete export exists.")
def export_model_command(backend: str, model: str | None, precision: str, force: bool) -> None:
    """Export a model for its runtime, once and offline, into INFERENCE_MODEL_CACHE (workers read it there;
    an auto worker that finds nothing makes it at its first start)."""
    settings, _ = served_model(model)
    if not settings.served_model.exportable:
        alias = settings.served_model.alias
        raise click.ClickException(f"model {alias!r} runs on {settings.model_backend}: there is nothing to export")
    if backend == "auto":
        from inference_tasks.worker.runtimes.auto.export import export_auto, report_lines

        try:
            record = export_auto(settings, force=force, log=click.echo)
        except Exception as error:  # noqa: BLE001 - a worker's first start shows this line as its reason
            raise click.ClickException(f"auto: {type(error).__name__}: {error}") from None
        for line in report_lines(record):
            click.echo(line)
    elif backend == "ctranslate2":
        export_ctranslate2_only(settings, force)
    else:
        export_openvino_only(settings, precision, force)


def export_ctranslate2_only(settings: Any, force: bool) -> None:
    from inference_tasks.worker.runtimes.ctranslate2.export import export_ctranslate2
    from inference_tasks.worker.runtimes.ctranslate2.export_paths import runtime_missing

    if problem := runtime_missing():
        raise click.ClickException(problem)
    done = export_ctranslate2(settings, force=force)
    verb = f"exported in {done.seconds:.1f} s" if done.created else "already exported"
    click.echo(f"ctranslate2: {verb}: {done.path}")


def export_openvino_only(settings: Any, precision: str, force: bool) -> None:
    from inference_tasks.worker.runtimes.openvino.export import export_openvino, export_openvino_int8
    from inference_tasks.worker.runtimes.openvino.export_paths import runtime_missing

    if problem := runtime_missing():
        raise click.ClickException(problem)
    exports = [("", export_openvino)] if precision != "int8" else []
    exports += [(" int8", export_openvino_int8)] if precision != "f32" else []
    made = {}
    for label, export in exports:
        done = made[label] = export(settings, force=force)
        verb = f"exported in {done.seconds:.1f} s" if done.created else "already exported"
        click.echo(f"openvino{label}: {verb}: {done.path}")
    if precision == "auto":
        from inference_tasks.worker.runtimes.openvino.measure import measure_and_report

        # A new int8 export (first, forced, or a new recipe's) makes any recorded measurement stale.
        measure_and_report(settings, made[""].path, made[" int8"].path, force or made[" int8"].created)


@click.command("distil-model")
@click.argument("alias")
@click.option(
    "--pca-dims", type=click.IntRange(2, 4096), default=None, help="Dimensions of the static vectors (default 256)."
)
@click.option(
    "--name", default=None, help="The static model's name, in results and its directory (default ALIAS-static-DIMS)."
)
@click.option("--force", is_flag=True, help="Distil again even if the same distillation exists.")
@click.option(
    "--space", type=click.Choice(["static", "teacher"]), default="static", show_default=True,
    help="teacher: map the static vectors into ALIAS's own space (its width; comparable with its vectors).",
)  # fmt: skip
@click.option(
    "--fit-texts", type=click.Path(path_type=Path), default=None,
    help="With --space teacher: a file of texts to fit the map on, one per line (a sample of your documents).",
)  # fmt: skip
def distil_model_command(
    alias: str, pca_dims: int | None, name: str | None, force: bool, space: str, fit_texts: Path | None
) -> None:
    """Distil a static model (model2vec) from catalogue model ALIAS, offline, into INFERENCE_MODEL_CACHE;
    the last line printed is its directory, the `source` of a catalogue entry of kind "static"."""
    from inference_tasks.config.catalogue import distillation_problem
    from inference_tasks.worker.runtimes.model2vec.bridge import FitTextsError
    from inference_tasks.worker.runtimes.model2vec.distillation import distil
    from inference_tasks.worker.runtimes.model2vec.teacher_space import distil_in_teacher_space

    settings, _ = served_model(alias)
    teacher = settings.served_model
    if problem := distillation_problem(teacher):
        raise click.ClickException(problem)
    if fit_texts is not None and space != "teacher":
        raise click.ClickException("--fit-texts fits the map of --space teacher; add --space teacher or drop it")
    try:
        import skeletoken  # noqa: F401 - model2vec's distillation needs it
    except ImportError as error:
        raise click.ClickException(
            f"distil-model needs the static extra ({error}): pip install 'inference-tasks[static]'"
        ) from None
    try:
        if space == "teacher":
            done = distil_in_teacher_space(settings, teacher, pca_dims, name, force, fit_texts)
        else:
            done = distil(settings, teacher, pca_dims, name, force)
    except FitTextsError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"static: {f'distilled in {done.seconds:.1f} s' if done.created else 'already distilled'}", err=True)
    if space == "teacher":
        from inference_tasks.worker.runtimes.model2vec.manifest import read_manifest

        bridge = (read_manifest(done.path) or {}).get("bridge", {})
        click.echo(
            f"static: in {teacher.source}'s space, fitted on {bridge.get('texts')} texts ({bridge.get('from')}); "
            f"held-out cosine to the teacher {bridge.get('held_out_cosine')}", err=True,
        )  # fmt: skip
    click.echo(str(done.path))

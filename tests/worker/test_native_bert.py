"""The native BERT encoder (worker/runtimes/torch/native_bert.py): the default model's vectors equal
sentence-transformers' own, every model it cannot reproduce exactly falls back with the reason, and
INFERENCE_TORCH_ENGINE=sentence-transformers always takes sentence-transformers."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from benchmarks.harness.workload import make_batches
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.worker.runtimes.load_options import LoadOptions
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from inference_tasks.worker.runtimes.registry import load_dense_encoder
from inference_tasks.worker.runtimes.torch import native_bert
from inference_tasks.worker.runtimes.torch.native_bert_encoder import NativeBertEncoder
from inference_tasks.worker.runtimes.torch.sentence_transformer_encoder import SentenceTransformerEncoder

EDGE_TEXTS = ["", "   ", "Hello WORLD", "word " * 400, "émigré naïve café — 東京 🙂", "a\nb\tc"]


@pytest.fixture(scope="module")
def both():
    native = load_dense_encoder(DEFAULT_MODEL, "cpu", LoadOptions())
    reference = SentenceTransformerEncoder(DEFAULT_MODEL, resolve_model_path(DEFAULT_MODEL), "cpu")
    return native, reference


@pytest.mark.worker
def test_the_default_model_runs_natively_and_gives_sentence_transformers_vectors(both):
    """24 support tickets and edge cases (empty, whitespace, past max_seq_length, accents, emoji), with and
    without normalising, in one pass and in token-bounded passes: equal to sentence-transformers to 1e-6."""
    native, reference = both
    assert isinstance(native, NativeBertEncoder) and native.engine == "native-bert"
    assert (native.dim, native.max_tokens, native.precision) == (384, 256, "f32")
    texts = make_batches(1, 24, seed=11)[0] + EDGE_TEXTS
    for normalize in (True, False):
        np.testing.assert_allclose(native.encode(texts, normalize), reference.encode(texts, normalize), atol=1e-6)
    native.max_pass_tokens = 512
    try:
        np.testing.assert_allclose(native.encode(texts, True), reference.encode(texts, True), atol=1e-6)
    finally:
        native.max_pass_tokens = None
    assert native.token_counts(texts) == reference.token_counts(texts)
    assert native.prefix_tokens("query: ") == reference.prefix_tokens("query: ")
    assert native.token_spans(texts[0]) == reference.token_spans(texts[0])
    native.limit_length(16)
    reference.limit_length(16)
    try:
        np.testing.assert_allclose(native.encode(texts[:8], True), reference.encode(texts[:8], True), atol=1e-6)
    finally:
        native.limit_length(256)
        reference.limit_length(256)


def copy_of_default(tmp_path, edit_config=None, modules=None, drop=()):
    """The default model's directory with its weights linked, one file edited or left out."""
    source = resolve_model_path(DEFAULT_MODEL)
    target = tmp_path / "model"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors", *drop))
    (target / "model.safetensors").symlink_to(source / "model.safetensors")
    if edit_config:
        config = json.loads((target / "config.json").read_text())
        (target / "config.json").write_text(json.dumps({**config, **edit_config}))
    if modules is not None:
        (target / "modules.json").write_text(json.dumps(modules))
    return target


@pytest.mark.worker
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"edit_config": {"model_type": "mpnet"}}, "model_type 'mpnet' is not 'bert'"),
        ({"edit_config": {"hidden_act": "gelu_new"}}, "hidden_act 'gelu_new' is not 'gelu'"),
        ({"edit_config": {"position_embedding_type": "relative_key"}}, "position_embedding_type 'relative_key'"),
        ({"drop": ("tokenizer.json",)}, "no tokenizer.json"),
        (
            {"modules": [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ]},
            "not Transformer, Pooling and optionally Normalize",
        ),
    ],
)  # fmt: skip
def test_a_model_the_native_encoder_cannot_reproduce_runs_on_sentence_transformers(tmp_path, change, reason):
    path = copy_of_default(tmp_path, **change)
    assert reason in native_bert.unsupported(path)
    if "drop" not in change and "modules" not in change:  # loads as sentence-transformers would
        assert isinstance(load_dense_encoder(str(path), "cpu", LoadOptions()), SentenceTransformerEncoder)


@pytest.mark.worker
def test_the_sentence_transformers_engine_can_be_asked_for():
    encoder = load_dense_encoder(DEFAULT_MODEL, "cpu", LoadOptions(torch_engine="sentence-transformers"))
    assert isinstance(encoder, SentenceTransformerEncoder) and encoder.engine == "sentence-transformers"

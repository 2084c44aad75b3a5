"""The public tasks through a real prefork worker, real Redis and the real model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from celery.result import AsyncResult

from inference_tasks.config.defaults import DEFAULT_MAX_BATCH_TEXTS, DEFAULT_MAX_TEXT_CHARS, DEFAULT_MODEL
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, WORKER_INFO_TASK
from inference_tasks.worker.runtimes.model_files import resolve_model_path

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 60


def run(worker, task: str, *args, **kwargs):
    return worker.app.send_task(task, args=args, kwargs=kwargs).get(timeout=RESULT_TIMEOUT_S)


def failure_of(worker, task: str, *args, **kwargs) -> AsyncResult:
    """Send a task expected to fail and return its result once it is FAILURE."""
    result = worker.app.send_task(task, args=args, kwargs=kwargs)
    with pytest.raises(Exception):  # noqa: B017 - the stored exception is inspected below
        result.get(timeout=RESULT_TIMEOUT_S)
    assert result.state == "FAILURE"
    return result


def test_embed_returns_unit_norm_384_dim_vectors_in_input_order(inference_worker):
    """embed: one 384-dim unit vector per text, in the order sent (checked against single calls)."""
    texts = ["The cat sleeps on the sofa.", "Quarterly revenue grew by 8 percent.", "Reset my password"]
    batch = run(inference_worker, EMBED_TASK, texts)
    assert batch["model"] == "all-MiniLM-L6-v2"
    assert batch["dim"] == 384
    vectors = np.array(batch["embeddings"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    for index, text in enumerate(texts):
        alone = np.array(run(inference_worker, EMBED_TASK, [text])["embeddings"][0])
        assert np.allclose(alone, vectors[index], atol=1e-4)


@pytest.fixture(scope="module")
def unnormalised_model_dir(tmp_path_factory) -> Path:
    """A local sentence-transformers directory other than the default: all-MiniLM-L6-v2 without
    its final Normalize module (weights linked, not copied), so raw vectors are not unit-norm."""
    source = resolve_model_path(DEFAULT_MODEL)
    target = tmp_path_factory.mktemp("models") / "minilm-raw"
    target.mkdir()
    for entry in source.iterdir():
        if entry.name != "modules.json":
            (target / entry.name).symlink_to(entry)
    modules = json.loads((source / "modules.json").read_text())
    kept = [m for m in modules if not m["type"].endswith("Normalize")]
    assert len(kept) == len(modules) - 1
    (target / "modules.json").write_text(json.dumps(kept))
    return target


def test_any_local_model_directory_works_and_normalize_is_honoured(start_worker, unnormalised_model_dir):
    """INFERENCE_MODEL=<local dir>: the worker serves that model, named by its directory's name (never a
    path of the worker's host, in the result or worker_info); normalize=false
    returns its raw vectors, normalize=true unit vectors pointing the same way."""
    worker = start_worker(concurrency=1, model=str(unnormalised_model_dir))
    text = ["A plain sentence about a local model."]
    raw = run(worker, EMBED_TASK, text, normalize=False)
    unit = run(worker, EMBED_TASK, text)
    assert raw["model"] == unnormalised_model_dir.name
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=120)
    assert info["model"] == unnormalised_model_dir.name and str(unnormalised_model_dir) not in json.dumps(raw)
    raw_vector, unit_vector = np.array(raw["embeddings"][0]), np.array(unit["embeddings"][0])
    assert abs(np.linalg.norm(raw_vector) - 1.0) > 0.05
    assert np.allclose(raw_vector / np.linalg.norm(raw_vector), unit_vector, atol=1e-5)


def test_embed_places_similar_sentences_closer_than_unrelated_ones(inference_worker):
    """Paraphrases score a higher cosine than an unrelated sentence does."""
    texts = [
        "How do I reset my password?",
        "I forgot my password and cannot log in.",
        "The train to Berlin leaves at noon.",
    ]
    vectors = np.array(run(inference_worker, EMBED_TASK, texts)["embeddings"])
    close, far = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert close > far + 0.3, (close, far)


def test_classify_picks_the_obvious_label_in_input_order(inference_worker):
    """Zero-shot classify: clear examples get the matching label; scores cover every label."""
    labels = ["sports", "cooking", "finance"]
    texts = [
        "The striker scored twice in the second half of the football match.",
        "Simmer the tomato sauce with garlic and basil for twenty minutes.",
        "The central bank raised interest rates and the stock market fell.",
        "Bake the bread dough in a hot oven until golden.",
    ]
    predictions = run(inference_worker, CLASSIFY_TASK, texts, labels)
    assert [p["label"] for p in predictions] == ["sports", "cooking", "finance", "cooking"]
    for prediction in predictions:
        assert set(prediction["scores"]) == set(labels)
        assert prediction["score"] == max(prediction["scores"].values())


BAD_REQUESTS = [
    pytest.param(EMBED_TASK, ("not a list",), {}, "texts must be a list of strings, got a string", id="embed-str"),
    pytest.param(EMBED_TASK, ({"a": 1},), {}, "texts must be a list of strings, got an object", id="embed-dict"),
    pytest.param(EMBED_TASK, ([],), {}, "texts is empty", id="embed-empty"),
    pytest.param(EMBED_TASK, (["ok", 3],), {}, "texts[1] must be a string, got a number (3)", id="embed-int"),
    pytest.param(EMBED_TASK, (["ok", None],), {}, "texts[1] must be a string, got null", id="embed-null"),
    pytest.param(EMBED_TASK, (["ok", "  "],), {}, "texts[1] is empty or blank", id="embed-blank"),
    pytest.param(
        EMBED_TASK,
        (["x"] * (DEFAULT_MAX_BATCH_TEXTS + 1),),
        {},
        f"{DEFAULT_MAX_BATCH_TEXTS + 1} texts is more than the limit of {DEFAULT_MAX_BATCH_TEXTS}",
        id="embed-too-many",
    ),
    pytest.param(
        EMBED_TASK,
        (["a" * (DEFAULT_MAX_TEXT_CHARS + 1)],),
        {},
        f"more than the limit of {DEFAULT_MAX_TEXT_CHARS} (INFERENCE_MAX_TEXT_CHARS); texts are rejected",
        id="embed-too-long",
    ),
    pytest.param(EMBED_TASK, (["ok"],), {"normalize": "yes"}, "normalize must be true or false", id="embed-flag"),
    pytest.param(EMBED_TASK, (["ok"],), {"normalise": True}, "unknown argument(s) 'normalise'", id="embed-typo"),
    pytest.param(EMBED_TASK, (), {}, "texts must be a list of strings, got null", id="embed-missing"),
    pytest.param(CLASSIFY_TASK, (["ok"], []), {}, "labels needs at least 2 labels", id="classify-no-labels"),
    pytest.param(CLASSIFY_TASK, (["ok"], ["only"]), {}, "labels needs at least 2 labels", id="classify-1"),
    pytest.param(CLASSIFY_TASK, (["ok"], ["a", ""]), {}, "labels[1] is empty or blank", id="classify-empty"),
    pytest.param(
        CLASSIFY_TASK, (["ok"], ["spam", "ham", "spam"]), {}, "labels[2] 'spam' duplicates labels[0]", id="dup"
    ),
    pytest.param(CLASSIFY_TASK, (["ok"], "a,b"), {}, "labels must be a list of strings", id="classify-str"),
    pytest.param(CLASSIFY_TASK, (["ok"], ["a", 2]), {}, "labels[1] must be a string", id="classify-int"),
    pytest.param(CLASSIFY_TASK, ("ok", ["a", "b"]), {}, "texts must be a list of strings", id="classify-texts"),
    pytest.param(
        CLASSIFY_TASK, (["ok"], ["a", "b"]), {"threshold": 0.5}, "unknown argument(s) 'threshold'", id="classify-kw"
    ),
    pytest.param(WORKER_INFO_TASK, (), {"verbose": True}, "unknown argument(s) 'verbose'", id="info-kw"),
]


@pytest.mark.parametrize(("task", "args", "kwargs", "message"), BAD_REQUESTS)
def test_bad_input_fails_alone_with_a_readable_message(inference_worker, task, args, kwargs, message):
    """Each bad request is FAILURE with a message naming the problem; the next request succeeds."""
    failed = failure_of(inference_worker, task, *args, **kwargs)
    stored = failed.backend.get_task_meta(failed.id)
    assert stored["status"] == "FAILURE"
    assert message in str(failed.result), str(failed.result)
    assert inference_worker.process.poll() is None
    assert run(inference_worker, EMBED_TASK, ["still serving"])["dim"] == 384


def test_too_many_positional_arguments_fail_alone(inference_worker):
    """An argument list longer than the signature (a producer bug) fails alone, readably."""
    failed = failure_of(inference_worker, EMBED_TASK, ["a"], True, "json", "extra")
    assert "positional argument" in str(failed.result)
    assert run(inference_worker, EMBED_TASK, ["still serving"])["dim"] == 384

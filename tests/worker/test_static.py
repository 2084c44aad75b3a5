"""The static lane: `inference-tasks distil-model` distils a model2vec model from the default model, a
catalogue entry of kind "static" serves it through a real worker on its own queue (vectors equal
model2vec's, unit length, the dense contract: dimensions, encodings, usage, classify, bi-encoder rerank,
chunks), its children import no torch, and a static entry that cannot be served stops the worker at
start naming the command to run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from inference_tasks import codec, producer
from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_CHUNKS_TASK,
    EMBED_SPARSE_TASK,
    EMBED_TASK,
    RERANK_TASK,
    WORKER_INFO_TASK,
)
from inference_tasks.worker.runtimes.model2vec.manifest import MANIFEST_FILE
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT, producer_app
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 90
TICKETS = [json.loads(line)["text"] for line in (REPO_ROOT / "data" / "support_tickets.jsonl").read_text().splitlines()]
CLI = str(REPO_ROOT / ".venv" / "bin" / "inference-tasks")


def distil_model(cache: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = clean_env() | {"INFERENCE_MODEL_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [CLI, "distil-model", *arguments], capture_output=True, text=True, env=environment, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory) -> Path:
    """The default model distilled once for the module (model2vec, ~15 s on 2 cores)."""
    cache = tmp_path_factory.mktemp("model-cache")
    done = distil_model(cache, "minilm", "--pca-dims", "128")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_dir() and path.parent.parent == cache
    return path


@pytest.fixture(scope="module")
def static_pool(start_worker, fresh_redis_url, tmp_path_factory, static_dir):
    models = tmp_path_factory.mktemp("static") / "models.toml"
    models.write_text(f'[models.static]\nsource = "{static_dir}"\nkind = "static"\nprompts = {{ query = "query: " }}\n')
    url = fresh_redis_url()
    worker = start_worker(model="static", redis_url=url, concurrency=2, models_file=str(models))
    return {"app": producer_app(url), "worker": worker}


def reference(static_dir: Path, texts: list[str]) -> np.ndarray:
    from model2vec import StaticModel

    vectors = StaticModel.from_pretrained(static_dir).encode(texts, normalize=False).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def call(app, task: str, *args, **kwargs):
    return producer.collect(producer.send(app, task, args=list(args), kwargs=kwargs, model="static"), RESULT_TIMEOUT_S)


def test_distil_model_records_its_teacher_and_keeps_a_finished_distillation(static_dir):
    manifest = json.loads((static_dir / MANIFEST_FILE).read_text())
    assert manifest["name"] == "minilm-static-128" and manifest["dims"] == 128 and manifest["vocabulary"] > 20_000
    assert manifest["teacher"]["alias"] == "minilm" and manifest["teacher"]["source"] == "all-MiniLM-L6-v2"
    assert manifest["model2vec"] and manifest["teacher"]["fingerprint"]
    again = distil_model(static_dir.parent.parent, "minilm", "--pca-dims", "128")
    assert again.returncode == 0 and "already distilled" in again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(static_dir)


def test_distil_model_refuses_a_model_that_is_no_dense_transformer(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text(f'[models.splade]\nsource = "{tmp_path}"\nkind = "sparse"\n')
    environment = {"INFERENCE_MODELS_FILE": str(models)}
    done = subprocess.run(
        [CLI, "distil-model", "splade"], capture_output=True, text=True, env=clean_env() | environment, timeout=120
    )
    assert done.returncode != 0 and "is of kind 'sparse'" in done.stderr and "kind 'embedding'" in done.stderr
    assert not (tmp_path / "static").exists()


def test_a_static_worker_serves_model2vecs_unit_vectors_and_imports_no_torch(static_pool, static_dir):
    app = static_pool["app"]
    texts = TICKETS[:48]
    result = call(app, EMBED_TASK, texts)
    vectors = np.array(result["embeddings"], dtype=np.float32)
    assert result["model"] == "minilm-static-128" and result["alias"] == "static" and result["dim"] == 128
    np.testing.assert_allclose(vectors, reference(static_dir, texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert result["usage"]["tokens"] > len(texts) and result["usage"]["truncated"] == []
    short = call(app, EMBED_TASK, texts[:4], dimensions=64, encoding="f32-base64")
    decoded = codec.decode_vectors(short["embeddings"], short["dim"])
    assert decoded.shape == (4, 64) and np.allclose(np.linalg.norm(decoded, axis=1), 1.0, atol=1e-5)
    info = app.send_task(WORKER_INFO_TASK, queue="inference.static").get(timeout=RESULT_TIMEOUT_S)
    assert info["backend"] == "model2vec" and info["model"] == "minilm-static-128" and info["dim"] == 128
    assert info["vector_space"] == "minilm-static-128"  # its own: comparable with no other model's
    assert info["limits"] == {"texts_per_task": 4096, "text_chars": 20_000}  # a static kind's own task limit
    assert info["loaded_runtimes"] == ["model2vec"]  # no torch, no transformers in the child
    assert info["model_error"] is None


def test_a_static_model_serves_the_dense_contract(static_pool):
    app = static_pool["app"]
    labels = call(app, CLASSIFY_TASK, ["I was charged twice for my subscription"], ["billing", "bug report"])
    assert labels[0]["label"] in ("billing", "bug report") and labels[0]["alias"] == "static"
    ranked = call(app, RERANK_TASK, "refund for a double charge", TICKETS[:10], top_n=3)
    assert ranked["method"] == "bi-encoder" and len(ranked["results"]) == 3
    chunks = call(app, EMBED_CHUNKS_TASK, [" ".join(TICKETS[:20])], chunk_tokens=32, overlap_tokens=4)
    assert len(chunks["chunks"][0]) > 1 and chunks["chunks"][0][0]["start"] == 0
    with pytest.raises(Exception, match="is a static embedding model; it needs a sparse encoder"):
        call(app, EMBED_SPARSE_TASK, ["a text"])


def test_a_static_model_takes_tasks_of_thousands_of_texts_and_names_its_limit(static_pool):
    """A static entry's per-task limit is 4,096 texts (INFERENCE_MAX_BATCH_TEXTS stays 256 for the rest)."""
    app = static_pool["app"]
    texts = [TICKETS[index % len(TICKETS)] for index in range(1000)]
    assert call(app, EMBED_TASK, texts, encoding="f32-base64")["count"] == 1000
    with pytest.raises(Exception, match=r"4097 texts is more than the limit of 4096 per task .*max_batch_texts"):
        call(app, EMBED_TASK, [TICKETS[index % len(TICKETS)] for index in range(4097)], encoding="f32-base64")


@pytest.mark.parametrize("problem", ["missing", "other-model2vec"])
def test_a_static_entry_that_cannot_be_served_stops_the_worker_naming_distil_model(
    problem, start_worker, static_dir, tmp_path
):  # fmt: skip
    source = tmp_path / "minilm-static"
    if problem == "other-model2vec":
        import shutil

        shutil.copytree(static_dir, source)
        manifest = json.loads((source / MANIFEST_FILE).read_text()) | {"model2vec": "0.1.0"}
        (source / MANIFEST_FILE).write_text(json.dumps(manifest))
    models = tmp_path / "models.toml"
    models.write_text(f'[models.static]\nsource = "{source}"\nkind = "static"\n')
    worker = start_worker(model="static", models_file=str(models), wait_ready=False)
    wait_until(lambda: worker.process.poll() is not None, 120, "the worker to stop")
    log = worker.log()
    assert worker.process.returncode != 0 and "ready." not in log
    assert "inference-tasks distil-model" in log, log[-2000:]
    if problem == "other-model2vec":
        assert "distilled by model2vec 0.1.0" in log
    assert os.path.isdir(tmp_path)


@pytest.fixture(scope="module")
def bridged_dir(static_dir, tmp_path_factory) -> Path:
    """The module's static model mapped into the teacher's space, the map fitted on the even tickets (a
    sample of the documents searched below, as an operator fits it on a sample of what they index)."""
    sample = tmp_path_factory.mktemp("fit") / "documents.txt"
    sample.write_text("\n".join(TICKETS[::2]) + "\n")
    done = distil_model(static_dir.parent.parent, "minilm", "--pca-dims", "128", "--space", "teacher",
                        "--fit-texts", str(sample))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "in all-MiniLM-L6-v2's space, fitted on 150 texts (documents.txt)" in done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def test_a_static_model_in_the_teachers_space_finds_the_teachers_answers(
    bridged_dir, static_dir, start_worker, inference_worker, tmp_path
):  # fmt: skip
    """`distil-model minilm --space teacher`: the static model's table multiplied by a map fitted on sample
    texts, over the static distillation already in the cache; a static worker serves 384-wide unit vectors that the
    teacher's query vectors search (two-stage retrieval's first stage) and says whose space they are in."""
    manifest = json.loads((bridged_dir / MANIFEST_FILE).read_text())
    assert manifest["name"] == "minilm-static-128-teacher" and manifest["space"] == "teacher"
    assert manifest["dims"] == 384 and manifest["pca_dims"] == 128 and manifest["bridged_from"] == str(static_dir)
    assert manifest["bridge"]["texts"] == 150 and manifest["bridge"]["held_out_cosine"] >= 0.8, manifest["bridge"]
    models = tmp_path / "models.toml"
    models.write_text(f'[models.bridged]\nsource = "{bridged_dir}"\nkind = "static"\n')
    worker = start_worker(model="bridged", redis_url=inference_worker.redis_url, concurrency=1,
                          models_file=str(models))  # fmt: skip
    documents = TICKETS[1::2]  # none of them fitted the map
    served = producer.collect(
        producer.send(worker.app, EMBED_TASK, args=[documents], model="bridged"), RESULT_TIMEOUT_S
    )
    bridged = np.array(served["embeddings"], dtype=np.float32)
    assert served["dim"] == 384 and served["model"] == "minilm-static-128-teacher"
    np.testing.assert_allclose(np.linalg.norm(bridged, axis=1), 1.0, atol=1e-5)
    teacher = np.array(
        inference_worker.app.send_task(EMBED_TASK, args=[documents]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]
    )
    cosine = (bridged * teacher).sum(axis=1)
    # Each document's teacher vector finds its own static vector first among the 150 (what a query needs).
    found = np.mean((teacher @ bridged.T).argmax(axis=1) == np.arange(len(documents)))
    print(f"\n[bridged] cosine to the teacher: mean {cosine.mean():.3f} min {cosine.min():.3f}; own first {found:.3f}")
    assert cosine.mean() >= 0.8 and found >= 0.9
    info = worker.app.send_task(WORKER_INFO_TASK, queue="inference.bridged").get(timeout=RESULT_TIMEOUT_S)
    assert info["vector_space"] == "all-MiniLM-L6-v2" and info["loaded_runtimes"] == ["model2vec"]

"""Models named by hub id (hub.py): a catalogue source `owner/name` with an optional pinned revision,
resolved offline from a Hugging Face cache in the hub's own layout (refs, snapshots), built here from
the packaged all-MiniLM-L6-v2; a worker serves it, and refuses to start naming `pull-model` when the
model is not in the cache."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from inference_tasks.config import Settings
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.config.entry_fields import CatalogueError
from inference_tasks.routing import EMBED_TASK
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.waiting import wait_until

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A Hugging Face hub cache holding HUB_ID at COMMIT (branch main), as `pull-model` leaves it."""
    cache = tmp_path_factory.mktemp("hub")
    repo = cache / f"models--{HUB_ID.replace('/', '--')}"
    shutil.copytree(resolve_model_path(DEFAULT_MODEL), repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return cache


def catalogue_file(tmp_path, source: str, revision: str | None = None) -> str:
    pinned = f'revision = "{revision}"\n' if revision else ""
    path = tmp_path / "models.toml"
    path.write_text(f'[models.hubmini]\nsource = "{source}"\n{pinned}')
    return str(path)


def test_a_hub_id_resolves_offline_from_the_cache_by_branch_or_pinned_commit(hub_cache):
    snapshot = hub_cache / f"models--{HUB_ID.replace('/', '--')}" / "snapshots" / COMMIT
    assert resolve_model_path(HUB_ID, hub_cache) == snapshot
    assert resolve_model_path(f"{HUB_ID}@{COMMIT}", hub_cache) == snapshot
    assert resolve_model_path(f"{HUB_ID}@main", hub_cache) == snapshot


def test_a_hub_model_not_in_the_cache_names_the_pull_command(hub_cache):
    with pytest.raises(FileNotFoundError) as missing:
        resolve_model_path("BAAI/bge-small-en-v1.5@v1.5", hub_cache)
    assert "model 'BAAI/bge-small-en-v1.5' at revision v1.5 is not in the Hugging Face cache" in str(missing.value)
    assert "inference-tasks pull-model BAAI/bge-small-en-v1.5" in str(missing.value)


def test_the_catalogue_takes_a_hub_id_and_its_revision_and_refuses_what_is_neither(tmp_path):
    entry = Settings(models_file=catalogue_file(tmp_path, HUB_ID, COMMIT), model="hubmini").served_model
    assert entry.source == f"{HUB_ID}@{COMMIT}"
    assert Settings(models_file=catalogue_file(tmp_path, HUB_ID), model="hubmini").served_model.source == HUB_ID
    for source, revision, said in [
        (HUB_ID, "a/b", "models.hubmini.revision: a branch, tag or commit"),
        (DEFAULT_MODEL, "main", "models.hubmini.revision: a branch, tag or commit"),
        ("not a model", None, "'not a model' is not a directory, nor a hub id (owner/name)"),
    ]:
        with pytest.raises(CatalogueError) as refused:
            _ = Settings(models_file=catalogue_file(tmp_path, source, revision), model="hubmini").served_model
        assert said in str(refused.value)


def test_pull_model_refuses_what_it_cannot_pull(tmp_path):
    def pull(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "inference_tasks.ops.cli", "pull-model", *args], cwd=REPO_ROOT,
            env=clean_env(INFERENCE_MODELS_FILE=catalogue_file(tmp_path, HUB_ID, COMMIT)),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    packaged = pull("minilm")
    assert (
        packaged.returncode == 1 and "is 'all-MiniLM-L6-v2', not a hub id: there is nothing to pull" in packaged.stderr
    )
    assert "pins its revision in the catalogue" in pull("hubmini", "--revision", "main").stderr
    assert "is neither a catalogue alias (minilm" in pull("no-such-model").stderr
    assert "names its revision; drop --revision" in pull(f"{HUB_ID}@{COMMIT}", "--revision", "main").stderr


def test_a_worker_serves_a_pulled_hub_model_offline_and_refuses_one_not_pulled(start_worker, hub_cache, tmp_path):
    """With the model in HF_HUB_CACHE, a worker for the catalogue alias serves it with the network off
    (vectors equal the packaged model's); with an empty cache it stops at start naming the command."""
    models = catalogue_file(tmp_path, HUB_ID, COMMIT)
    empty = tmp_path / "empty-hub"
    empty.mkdir()
    refused = start_worker(
        models_file=models, model="hubmini", wait_ready=False, extra_env={"HF_HUB_CACHE": str(empty)}
    )
    wait_until(lambda: refused.process.poll() is not None, 120, "the worker without the model to stop")
    assert refused.process.returncode != 0 and "ready." not in refused.log()
    assert "run `inference-tasks pull-model hubmini` once at deploy time" in refused.log()
    worker = start_worker(
        models_file=models, model="hubmini", concurrency=1, extra_env={"HF_HUB_CACHE": str(hub_cache)}
    )
    texts = ["Red running shoes", "My parcel never arrived"]
    served = worker.app.send_task(EMBED_TASK, args=[texts], queue="inference.hubmini").get(timeout=120)
    assert served["model"] == f"{HUB_ID}@{COMMIT}" and served["alias"] == "hubmini"
    from sentence_transformers import SentenceTransformer

    packaged = SentenceTransformer(str(resolve_model_path(DEFAULT_MODEL)), device="cpu", local_files_only=True)
    expected = packaged.encode(texts, normalize_embeddings=True)
    assert np.abs(np.array(served["embeddings"]) - expected).max() < 1e-5

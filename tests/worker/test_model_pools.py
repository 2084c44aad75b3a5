"""Many models, one fleet: two pools side by side on one Redis, each serving its own catalogue model on
its own queue, through real workers and the real model (the second model is a copy of the default
one's directory under another alias: the routing, not the weights, is the point here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inference_tasks import producer
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.cores import available_cores
from inference_tasks.ml import store
from inference_tasks.redis_access.connections import redis_for
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, TRAIN_CLASSIFIER_TASK
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from tests.support.localstack import REPO_ROOT, producer_app
from tests.support.operator_tools import cli
from tests.support.ruby_runner import ruby
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 60
TEXT = "My invoice was charged twice this month."


def twin_of_the_default_model(directory: Path) -> Path:
    """The default model's files under another directory (links, not copies): another model to load."""
    directory.mkdir()
    for item in resolve_model_path(DEFAULT_MODEL).iterdir():
        (directory / item.name).symlink_to(item)
    return directory


@pytest.fixture(scope="module")
def catalogue_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalogue")
    twin = twin_of_the_default_model(root / "twin-minilm")
    path = root / "models.toml"
    path.write_text(f'default = "minilm"\n[models.twin]\nsource = "{twin}"\n')
    return path


@pytest.fixture(scope="module")
def pools(start_worker, fresh_redis_url, catalogue_file):
    """The default model's pool (queues inference, inference.minilm) and twin's (inference.twin)."""
    url = fresh_redis_url()
    common = {"redis_url": url, "concurrency": 1, "models_file": str(catalogue_file)}
    default = start_worker(queues="inference,inference.minilm", **common)
    twin = start_worker(queues="inference.twin", model="twin", **common)
    return {"url": url, "minilm": default, "twin": twin, "app": producer_app(url)}


def test_each_model_is_answered_by_its_own_pool_and_says_so(pools):
    """model="twin" goes to twin's pool; no model, or model="minilm", to the default pool; each result
    names the alias and the model that served it; both pools hold the same weights, so the vectors agree."""
    app = pools["app"]
    sent = {
        "twin": producer.send(app, EMBED_TASK, args=[[TEXT]], model="twin"),
        "none": producer.send(app, EMBED_TASK, args=[[TEXT]]),
        "minilm": producer.send(app, EMBED_TASK, args=[[TEXT]], model="minilm", max_queue_depth=100),
    }
    results = {key: producer.collect(result, RESULT_TIMEOUT_S) for key, result in sent.items()}
    assert results["twin"]["alias"] == "twin" and results["twin"]["model"].endswith("twin-minilm")
    assert results["none"]["alias"] == results["minilm"]["alias"] == "minilm"
    assert results["none"]["model"] == results["minilm"]["model"] == DEFAULT_MODEL
    np.testing.assert_allclose(results["twin"]["embeddings"], results["none"]["embeddings"], atol=1e-6)
    wait_until(lambda: sent["twin"].id in pools["twin"].successes(), 30, "twin's pool to log its task")
    assert sent["twin"].id not in pools["minilm"].successes()
    # The result is stored before the success line reaches the log: wait for the line.
    wait_until(
        lambda: {sent["none"].id, sent["minilm"].id} <= set(pools["minilm"].successes()), 30, "the default pool's log"
    )
    [prediction] = producer.collect(
        producer.send(app, CLASSIFY_TASK, args=[[TEXT], ["billing", "shipping"]], model="twin"), RESULT_TIMEOUT_S
    )
    assert prediction["label"] == "billing" and prediction["alias"] == "twin"


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("twin", "this worker serves model 'minilm'; model 'twin' is served on queue 'inference.twin'"),
        ("nope", "unknown model 'nope'; known models: minilm, "),
        (3, "model must be a model alias (a string), got a number (3)"),
    ],
)
def test_a_task_asking_for_another_model_fails_naming_where_it_is_served(pools, model, problem):
    """Pushed onto the default model's queue by hand (as a raw producer could), a task for another model
    is never answered by this one: it fails, saying which queue serves what it asked for."""
    result = pools["app"].send_task(EMBED_TASK, args=[[TEXT]], kwargs={"model": model}, queue="inference")
    result.get(timeout=RESULT_TIMEOUT_S, propagate=False)
    assert result.state == "FAILURE" and problem in str(result.result)
    if model == "nope":
        assert str(result.result).endswith("twin")  # every catalogue model is named, the file's too


def test_a_head_trained_on_one_model_refuses_another(pools):
    """A head records the model it was fitted on: classifying with it on twin's pool fails, naming both."""
    client = redis_for(pools["url"])
    labels = ["billing", "shipping"]
    zeros = np.zeros((2, 384), dtype=np.float32)
    head = store.ClassifierHead("pools-head", DEFAULT_MODEL, labels, zeros, np.zeros(2, dtype=np.float32))
    store.save_head(client, head)
    sent = producer.send(pools["app"], CLASSIFY_TASK, args=[[TEXT]], kwargs={"classifier": "pools-head"}, model="twin")
    sent.get(timeout=RESULT_TIMEOUT_S, propagate=False)
    assert sent.state == "FAILURE"
    message = str(sent.result)
    assert f"trained on embeddings of model {DEFAULT_MODEL!r}" in message and "alias 'twin'" in message
    ok = producer.send(pools["app"], CLASSIFY_TASK, args=[[TEXT]], kwargs={"classifier": "pools-head"})
    assert producer.collect(ok, RESULT_TIMEOUT_S)[0]["alias"] == "minilm"


def test_a_worker_told_to_consume_another_models_queue_refuses_to_start(start_worker, catalogue_file):
    """Serving minilm but given -Q inference.twin: it stops before consuming anything, saying why."""
    worker = start_worker(models_file=str(catalogue_file), queues="inference.twin", concurrency=1, wait_ready=False)
    wait_until(lambda: worker.process.poll() is not None, 120, "the worker to stop")
    log = worker.log()
    assert worker.process.returncode != 0 and "ready." not in log
    assert "serves model 'minilm'" in log and "inference.twin (model 'twin')" in log


def test_a_worker_with_a_bad_catalogue_refuses_to_start_naming_the_field(start_worker, tmp_path):
    bad = tmp_path / "models.toml"
    bad.write_text('[models.e5]\nsource = "/no/such/dir"\n')
    worker = start_worker(models_file=str(bad), concurrency=1, wait_ready=False)
    wait_until(lambda: worker.process.poll() is not None, 120, "the worker to stop")
    assert f"{bad}: models.e5.source: '/no/such/dir' is not a directory" in worker.log()


@pytest.mark.external
def test_the_ruby_client_routes_by_model(pools):
    """embed/classify(..., model: "twin") reach twin's pool, no model the default one; a malformed alias
    raises ArgumentError before anything is pushed."""
    report = ruby("model_routing.rb", pools["url"])
    assert report["twin"]["alias"] == "twin" and report["twin"]["model"].endswith("twin-minilm")
    assert report["default"] == {"model": DEFAULT_MODEL, "alias": "minilm"}
    assert report["same_vector"] is True
    assert report["compact_alias"] == "twin" and report["compact_dim"] == 384
    assert report["classify"] == {"label": "billing", "alias": "twin"}
    assert "model must be a catalogue alias" in report["refused"]


def test_the_doctor_judges_the_pools_of_one_host_together(pools, start_worker, catalogue_file):
    """Each pool's row names its model; the host's verdict sums every pool's native threads: one more
    twin pool that takes the host past its cores makes it OVERSUBSCRIBED."""
    within = cli("doctor", "--skip-model", redis_url=pools["url"])
    assert "│ minilm" in within.stdout and "│ twin" in within.stdout, within.stdout
    assert "OVERSUBSCRIBED" not in within.stdout, within.stdout
    extra = start_worker(
        redis_url=pools["url"], queues="inference.twin", model="twin", models_file=str(catalogue_file),
        concurrency=max(1, available_cores() - 1),
    )  # fmt: skip
    try:

        def doctor_once_every_child_is_up() -> str | None:
            out = cli("doctor", "--skip-model", redis_url=pools["url"]).stdout
            return None if "still starting" in out or out.count("│ twin") < 2 else out

        over = wait_until(doctor_once_every_child_is_up, 90, "the doctor to see every pool's children up")
        assert "OVERSUBSCRIBED" in over, over
        assert f"{available_cores() + 1} compute threads on {available_cores()} cores" in over, over
    finally:
        extra.stop()


def test_a_trainer_per_model_fits_heads_on_its_models_embeddings(pools, start_worker, catalogue_file):
    """`training.twin`'s trainer (INFERENCE_MODEL=twin, trainer profile) fits a head on twin's vectors;
    twin's pool classifies with it, the default pool refuses it, naming the model it was fitted on."""
    rows = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").open()]
    kept = [row for row in rows if row["label"] in ("billing", "shipping")][:40]
    trainer = start_worker(
        redis_url=pools["url"], queues="training.twin", model="twin", profile="trainer", trainer_threads=1,
        concurrency=1, models_file=str(catalogue_file),
    )  # fmt: skip
    try:
        app = pools["app"]
        texts, labels = [row["text"] for row in kept], [row["label"] for row in kept]
        sent = producer.send(
            app, TRAIN_CLASSIFIER_TASK, kwargs={"name": "twin-head", "texts": texts, "labels": labels}, model="twin"
        )
        trained = producer.collect(sent, 120)
        assert trained["alias"] == "twin" and trained["model"].endswith("twin-minilm")
        served = producer.send(app, CLASSIFY_TASK, args=[[TEXT]], kwargs={"classifier": "twin-head"}, model="twin")
        assert producer.collect(served, RESULT_TIMEOUT_S)[0]["alias"] == "twin"
        refused = producer.send(app, CLASSIFY_TASK, args=[[TEXT]], kwargs={"classifier": "twin-head"})
        refused.get(timeout=RESULT_TIMEOUT_S, propagate=False)
        assert refused.state == "FAILURE" and "twin-minilm" in str(refused.result)
    finally:
        trainer.stop()

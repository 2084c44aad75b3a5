"""INFERENCE_BACKEND=auto, the default: `export-model` races every CPU runtime per request size and records
the winners; a worker with no runtime setting and no record makes it at its first start, once, under a
lock; where nothing faster can run it serves torch and says why. Also the CTranslate2 runtime on its own
and OpenVINO's one-text static shapes, which the race measures."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from inference_tasks.worker.runtimes.auto.choice_record import SIZES, read_record, record_dir
from inference_tasks.worker.runtimes.auto.export import report_lines
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from inference_tasks.worker.runtimes.openvino.export_paths import export_path
from inference_tasks.worker.runtimes.openvino.openvino_encoder import SHAPE_BUCKETS, OpenVinoEncoder
from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu
from tests.support.control import worker_report
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.operator_tools import exporter, scrape

pytest.importorskip("openvino", reason="the openvino extra is not installed (scripts/setup.sh installs it)")
pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed (scripts/setup.sh installs it)")

MODEL = "all-MiniLM-L6-v2"
RESULT_TIMEOUT_S = 120
TEXTS = ["Red running shoes", "My parcel never arrived", "ok", "The invoice lists the wrong VAT number twice."]
EXPORTED_AND_MEASURED = "exported and measured in"


def export_model(cache, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "export-model", *args],
        cwd=REPO_ROOT, env=clean_env(INFERENCE_MODEL_CACHE=str(cache)), capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def torch_vectors(texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(resolve_model_path(MODEL)), device="cpu", local_files_only=True)
    return model.encode(texts, normalize_embeddings=True)


@pytest.fixture(scope="module")
def started_pair(start_worker, tmp_path_factory):
    """Two workers with no runtime setting started at once on one empty cache: one runs `inference-tasks
    export-model` (backend auto) at its first start, under the lock, and the other waits and reads its
    record. That export is the one the module's other tests use (one race per module, ~60 s)."""
    cache = tmp_path_factory.mktemp("auto") / "cache"
    # One timing round (INFERENCE_MEASURE_ROUNDS): the race's mechanics, not a steady choice, are tested here.
    first = start_worker(backend=None, model_cache=str(cache), concurrency=2, measure_rounds=1, wait_ready=False)
    second = start_worker(backend=None, model_cache=str(cache), concurrency=1, measure_rounds=1, wait_ready=False)
    first.wait_ready()
    second.wait_ready()
    return cache, first, second


@pytest.fixture(scope="module")
def raced_cache(started_pair):
    return started_pair[0]


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_export_model_races_every_runtime_per_size_and_records_the_winners(raced_cache):
    cache = raced_cache
    record = read_record(record_dir(MODEL, resolve_model_path(MODEL), cache), host_cpu())
    assert record is not None and record["cpu"] == host_cpu() and record["timing"]["rounds"] == 1
    assert {"torch f32", "openvino f32", "ctranslate2 int8"} <= set(record["candidates"]), record["candidates"]
    for row in record["candidates"].values():
        assert set(row["sizes"]) == {str(size) for size in SIZES} and row["passed"] == (row["min_cosine"] >= 0.99)
    passed = [name for name, row in record["candidates"].items() if row["passed"]]
    for size, winner in record["winners"].items():
        best = max(record["candidates"][name]["sizes"][size]["texts_per_s"] for name in passed)
        assert winner in passed and record["candidates"][winner]["sizes"][size]["texts_per_s"] == best
    assert f"auto: serves {record['route']} on this host" in "\n".join(report_lines(record))
    again = export_model(cache)
    assert again.returncode == 0 and "auto: already measured" in again.stdout, again.stdout


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_two_workers_with_no_runtime_setting_export_once_and_serve_the_measured_route(started_pair):
    """Both start at once on one empty cache: one exports (under the lock), the other waits and reads its
    record; both serve the route with vectors within the gate of torch's; worker_info, the control
    report, doctor and the exporter say what is served and why."""
    cache, first, second = started_pair
    logs = first.log() + second.log()
    assert logs.count(EXPORTED_AND_MEASURED) == 1, logs
    record = read_record(record_dir(MODEL, resolve_model_path(MODEL), cache), host_cpu())
    assert record is not None
    reference = torch_vectors(TEXTS)
    for worker in (first, second):
        report = worker_report(worker.app)
        assert report["backend"] == "auto"
        assert report["runtime_choice"]["how"] == "measured"
        assert report["runtime_choice"]["served"] == record["route"]
        for texts in (TEXTS, TEXTS[:1]):  # a pass of several texts and a lone one (their lanes may differ)
            served = worker.app.send_task(EMBED_TASK, args=[texts]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]
            assert (np.array(served) * reference[: len(texts)]).sum(axis=1).min() >= 0.99
    info = first.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert "sentence_transformers" not in info["loaded_runtimes"]
    doctor = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "doctor", "--skip-model"],
        cwd=REPO_ROOT, env=clean_env(REDIS_URL=first.redis_url, COLUMNS="250"), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert f"auto: {record['route']}" in doctor.stdout and "auto runtime" in doctor.stdout, doctor.stdout
    with exporter(first.redis_url) as port:
        series = [dict(labels) for (name, labels), _ in scrape(port).items() if name == "inference_worker_runtime_info"]
    assert [(row["served"], row["how"]) for row in series] == [(record["route"], "measured")]


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_without_openvino_and_ctranslate2_an_auto_worker_serves_torch_and_says_why(start_worker, tmp_path):
    shims = tmp_path / "shims"
    for package in ("openvino", "ctranslate2"):
        (shims / package).mkdir(parents=True)
        (shims / package / "__init__.py").write_text(f"raise ImportError('{package} simulated as not installed')\n")
    worker = start_worker(
        backend=None, model_cache=str(tmp_path / "cache"), extra_env={"PYTHONPATH": f"{shims}:{REPO_ROOT}"}
    )
    choice = worker_report(worker.app)["runtime_choice"]
    assert choice["how"] == "fallback" and choice["served"] == "torch", choice
    assert "OpenVINO is not installed" in choice["why"] and "CTranslate2 is not installed" in choice["why"]
    assert "auto runtime: serving torch, nothing faster could be measured here" in worker.log()
    served = worker.app.send_task(EMBED_TASK, args=[TEXTS]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]
    assert np.abs(np.array(served) - torch_vectors(TEXTS)).max() <= 1e-5


@pytest.mark.worker
@pytest.mark.timeout(300)
def test_an_explicit_ctranslate2_worker_serves_its_int8_export(start_worker, raced_cache):
    cache = raced_cache
    worker = start_worker(backend="ctranslate2", model_cache=str(cache), concurrency=2)
    served = np.array(worker.app.send_task(EMBED_TASK, args=[TEXTS]).get(timeout=RESULT_TIMEOUT_S)["embeddings"])
    assert (served * torch_vectors(TEXTS)).sum(axis=1).min() >= 0.97
    report = worker_report(worker.app)
    assert report["backend"] == "ctranslate2"
    assert [child["precision"] for child in report["children"]] == ["int8", "int8"]


@pytest.mark.worker
def test_openvino_one_text_static_shapes_give_the_dynamic_models_vectors(raced_cache):
    """A lone text padded to a static shape (SHAPE_BUCKETS, and one past the largest: the dynamic model)
    gets the vector the dynamic-shape model gives it, in f32 to float rounding."""
    cache = raced_cache
    path = export_path(MODEL, resolve_model_path(MODEL), cache)
    bucketed, dynamic = OpenVinoEncoder(MODEL, path, "f32", SHAPE_BUCKETS), OpenVinoEncoder(MODEL, path, "f32")
    bucketed.compile(1)
    dynamic.compile(1)
    medium = "My parcel never arrived and the tracking page is broken, so please refund the order today"
    texts = ["ok", medium, " ".join(["word"] * 40)]
    lengths = bucketed.token_counts(texts)
    assert lengths[0] <= SHAPE_BUCKETS[0] < lengths[1] <= SHAPE_BUCKETS[-1] < lengths[2]
    for text in texts:
        assert np.abs(bucketed.encode([text], True) - dynamic.encode([text], True)).max() <= 1e-5

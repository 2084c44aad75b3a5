"""INFERENCE_BACKEND=openvino: the offline export, the accuracy gate against torch at both precisions,
and a real worker serving embed/classify from OpenVINO with one thread per child."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from inference_tasks.config import Settings
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, TRAIN_CLASSIFIER_TASK, TRAINING_QUEUE, WORKER_INFO_TASK
from inference_tasks.worker.runtimes.export_files import MANIFEST_FILE
from inference_tasks.worker.runtimes.held_out import UNSEEN_REPEATED_TOKENS
from inference_tasks.worker.runtimes.openvino.export_paths import IR_FILE
from inference_tasks.worker.runtimes.openvino.openvino_encoder import SHAPE_BUCKETS, OpenVinoEncoder, host_tuning
from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu
from tests.support.control import worker_report
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.operator_tools import exporter, scrape
from tests.support.waiting import wait_until

pytest.importorskip("openvino", reason="the openvino extra is not installed (scripts/setup.sh installs it)")

RESULT_TIMEOUT_S = 120
TICKETS = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").open()]
ODD_TEXTS = ["ok", "?", "🙂🎉👍", "Das Paket ist nie angekommen.", "これはテストです", "a" * 3000, "  padded  ", "x"]
LABELS = sorted({row["label"] for row in TICKETS})
# Where nothing can be downloaded from: any attempt fails fast instead of reaching a hub.
NO_NETWORK = {
    "HF_ENDPOINT": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
}


def export(cache, *args: str) -> subprocess.CompletedProcess:
    """export-model --backend openvino; a measurement (precision auto) times one round: its mechanics are
    tested here, not a steady choice."""
    return subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "export-model", "--backend", "openvino", *args],
        cwd=REPO_ROOT,
        env=clean_env(INFERENCE_MODEL_CACHE=str(cache), INFERENCE_MEASURE_ROUNDS="1", **NO_NETWORK),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """The full-precision export alone (the default, auto, also quantizes and measures: tested below)."""
    cache = tmp_path_factory.mktemp("model-cache")
    done = export(cache, "--precision", "f32")
    assert done.returncode == 0, done.stderr
    assert "openvino: exported in" in done.stdout
    return cache


@pytest.fixture(scope="module")
def export_dir(model_cache):
    (path,) = (model_cache / "openvino").iterdir()
    return path


@pytest.fixture(scope="module")
def int8_dir(model_cache):
    """The int8 export, quantized from the module's full-precision export (offline)."""
    done = export(model_cache, "--precision", "int8")
    assert done.returncode == 0, done.stderr
    assert "openvino int8: exported in" in done.stdout
    (path,) = (model_cache / "openvino").glob("*-int8")
    return path


@pytest.fixture(scope="module")
def torch_model():
    from sentence_transformers import SentenceTransformer

    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    return SentenceTransformer(str(resolve_model_path("all-MiniLM-L6-v2")), device="cpu", local_files_only=True)


def compiled_encoder(export_dir, precision: str, threads: int = 1) -> OpenVinoEncoder:
    encoder = OpenVinoEncoder("all-MiniLM-L6-v2", export_dir, precision)
    encoder.compile(threads)
    return encoder


def test_the_export_is_offline_and_forced_anew(model_cache, export_dir):
    """Made once with no network; --force makes it again (a second run keeps it untouched: checked by the
    default export's test below, which finds this export and the int8 one already made)."""
    assert (export_dir / IR_FILE).is_file()
    manifest = json.loads((export_dir / MANIFEST_FILE).read_text())
    assert manifest["model"] == "all-MiniLM-L6-v2" and manifest["backend"] == "openvino"
    assert not list(export_dir.glob("*.safetensors"))  # the IR carries the weights; torch's are not copied
    forced = export(model_cache, "--precision", "f32", "--force")
    assert forced.returncode == 0 and "exported in" in forced.stdout, forced.stderr
    assert json.loads((export_dir / MANIFEST_FILE).read_text())["exported_at"] > manifest["exported_at"]
    assert not list((model_cache / "openvino").glob("*.tmp-*"))  # no staging left


@pytest.mark.parametrize("precision", ["auto", "f32"])
def test_openvino_vectors_match_torch_within_the_accuracy_gate(export_dir, torch_model, precision):
    """On the repo's tickets plus short and odd texts: min cosine >= 0.999 and zero-shot labels agree
    on >= 99 % of tickets, at the runtime's own precision and at forced f32; a head's weights fitted on
    torch vectors pick the same labels from OpenVINO vectors."""
    encoder = compiled_encoder(export_dir, precision)
    texts = [row["text"] for row in TICKETS] + ODD_TEXTS
    reference = torch_model.encode(texts, normalize_embeddings=True, batch_size=32)
    ours = encoder.encode(texts, normalize=True)
    cosine = (reference * ours).sum(axis=1)
    labels_reference = torch_model.encode(LABELS, normalize_embeddings=True)
    labels_ours = encoder.encode(LABELS, normalize=True)
    tickets = len(TICKETS)
    agree = np.mean((reference[:tickets] @ labels_reference.T).argmax(1) == (ours[:tickets] @ labels_ours.T).argmax(1))
    # A linear head fitted on torch's vectors (least squares onto one-hot labels) used on OpenVINO's.
    targets = np.eye(len(LABELS))[[LABELS.index(row["label"]) for row in TICKETS]]
    weights, *_ = np.linalg.lstsq(reference[:tickets], targets, rcond=None)
    head_agree = np.mean((reference[:tickets] @ weights).argmax(1) == (ours[:tickets] @ weights).argmax(1))
    print(
        f"\n[openvino {precision} -> {encoder.precision}] min cosine {cosine.min():.6f} "
        f"(odd texts {cosine[tickets:].min():.6f}), zero-shot agreement {agree:.4f}, head agreement {head_agree:.4f}"
    )
    assert cosine.min() >= 0.999
    assert agree >= 0.99 and head_agree >= 0.99
    if precision == "f32":
        assert encoder.precision == "f32" and cosine.min() >= 0.99999


def test_the_amx_tuning_changes_speed_only(export_dir):
    """On an AMX host bf16 compiles with OpenVINO's Snippets off (host_tuning); the setting is accepted on
    any CPU, so this runs everywhere: the vectors equal the untuned model's, batched and one text."""
    texts = [row["text"] for row in TICKETS[:48]] + ODD_TEXTS
    amx = {"model": "an AMX host", "flags": ["avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]}
    tuned = OpenVinoEncoder("all-MiniLM-L6-v2", export_dir, "bf16", SHAPE_BUCKETS, cpu=amx)
    plain = OpenVinoEncoder("all-MiniLM-L6-v2", export_dir, "bf16", SHAPE_BUCKETS, cpu={"model": "x", "flags": []})
    for encoder in (tuned, plain):
        encoder.compile(1)
    assert tuned.tuning == {"SNIPPETS_MODE": "DISABLE"} and plain.tuning == {}
    assert host_tuning("f32", amx) == {} and host_tuning("int8", amx) == {}
    batched = (tuned.encode(texts, normalize=True) * plain.encode(texts, normalize=True)).sum(axis=1)
    one = [float(tuned.encode([text], True)[0] @ plain.encode([text], True)[0]) for text in texts[:8]]
    assert batched.min() >= 0.9999 and min(one) >= 0.9999, (batched.min(), one)


# int8 is a long case: the int8 export's accuracy gate and a worker serving it stay in the default suite.
@pytest.mark.parametrize("precision", ["auto", "f32", pytest.param("int8", marks=pytest.mark.long)])
def test_a_texts_vector_does_not_depend_on_its_batch_mates(request, precision):
    """Micro-batching puts unrelated texts together (padding them to the longest): each text's vector
    alone and inside a mixed batch must agree (int8 too: its scales are fixed at export, not per batch)."""
    directory = request.getfixturevalue("int8_dir" if precision == "int8" else "export_dir")
    encoder = compiled_encoder(directory, precision)
    texts = [row["text"] for row in TICKETS[:40]] + ODD_TEXTS
    together = encoder.encode(texts, normalize=True)
    alone = np.concatenate([encoder.encode([text], normalize=True) for text in texts])
    assert (together * alone).sum(axis=1).min() >= 0.9999


def test_the_int8_export_is_offline_and_quantized_from_the_full_precision_one(export_dir, int8_dir):
    """Quantized from the full-precision export with no network, beside it (a second run keeps it: the
    default export's test)."""
    from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe, recipe_digest

    manifest = json.loads((int8_dir / MANIFEST_FILE).read_text())
    assert (manifest["precision"], manifest["quantized_from"]) == ("int8", str(export_dir))
    assert manifest["calibration"]["texts"] > 300 and manifest["nncf"].startswith("3.4")
    assert manifest["calibration"]["recipe"] == recipe_digest(Int8Recipe())
    ir = (int8_dir / IR_FILE).read_text()
    assert "FakeQuantize" in ir or "FakeConvert" in ir or 'element_type="i8"' in ir or 'element_type="u8"' in ir


@pytest.mark.long
def test_an_int8_export_of_another_recipe_is_quantized_again(model_cache, int8_dir):
    """An export quantized by another recipe (an older release's manifest) is quantized again (a whole
    quantization, ~25 s on 2 cores: the long tier)."""
    from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe, recipe_digest

    manifest = json.loads((int8_dir / MANIFEST_FILE).read_text())
    del manifest["calibration"]["recipe"]  # as stop 51's exports were written
    (int8_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    redone = export(model_cache, "--precision", "int8")
    assert redone.returncode == 0 and "openvino int8: exported in" in redone.stdout, redone.stderr
    assert json.loads((int8_dir / MANIFEST_FILE).read_text())["calibration"]["recipe"] == recipe_digest(Int8Recipe())


@pytest.mark.long
def test_the_int8_export_is_deterministic(model_cache, int8_dir):
    """The same export twice gives the same vectors (fixed corpus, fixed order, static scales)."""
    texts = [row["text"] for row in TICKETS[:50]] + ODD_TEXTS
    first = compiled_encoder(int8_dir, "int8").encode(texts, normalize=True)
    forced = export(model_cache, "--precision", "int8", "--force")
    assert forced.returncode == 0 and "exported in" in forced.stdout, forced.stderr
    second = compiled_encoder(int8_dir, "int8").encode(texts, normalize=True)
    np.testing.assert_array_equal(first, second)


@pytest.mark.long
def test_int8_passes_the_accuracy_gate_against_torch(int8_dir, torch_model):
    """int8 against torch f32: min cosine >= 0.99 on the tickets, odd texts, long runs of one repeated token
    and 200 varied texts, zero-shot
    labels agree on >= 98 % of tickets, a head's held-out accuracy moves by at most one point, and
    each query's 10 nearest neighbours in a 1,000-text corpus overlap by >= 0.9 on average."""
    from tests.support.varied_texts import varied_texts

    encoder = compiled_encoder(int8_dir, "int8")
    assert encoder.precision == "int8"
    texts = [row["text"] for row in TICKETS] + ODD_TEXTS + list(UNSEEN_REPEATED_TOKENS) + varied_texts(200, seed=11)
    reference = torch_model.encode(texts, normalize_embeddings=True, batch_size=32)
    ours = encoder.encode(texts, normalize=True)
    cosine = (reference * ours).sum(axis=1)
    tickets = len(TICKETS)
    labels_reference = torch_model.encode(LABELS, normalize_embeddings=True)
    labels_ours = encoder.encode(LABELS, normalize=True)
    agree = np.mean((reference[:tickets] @ labels_reference.T).argmax(1) == (ours[:tickets] @ labels_ours.T).argmax(1))
    # A head fitted on torch's vectors of half the tickets (least squares onto one-hot labels), scored
    # on the other half from torch's and from int8's vectors.
    order = np.random.default_rng(0).permutation(tickets)
    train, held_out = order[: tickets // 2], order[tickets // 2 :]
    truth = np.array([LABELS.index(row["label"]) for row in TICKETS])
    weights, *_ = np.linalg.lstsq(reference[train], np.eye(len(LABELS))[truth[train]], rcond=None)
    accuracy_reference = np.mean((reference[held_out] @ weights).argmax(1) == truth[held_out])
    accuracy_ours = np.mean((ours[held_out] @ weights).argmax(1) == truth[held_out])
    more = varied_texts(1000 - len(texts), seed=12)
    corpus_reference = np.concatenate([reference, torch_model.encode(more, normalize_embeddings=True, batch_size=32)])
    corpus_ours = np.concatenate([ours, encoder.encode(more, normalize=True)])
    overlap = np.mean([
        len(set(np.argsort(-(corpus_reference @ corpus_reference[q]))[1:11])
            & set(np.argsort(-(corpus_ours @ corpus_ours[q]))[1:11])) / 10
        for q in range(0, len(corpus_ours), 5)
    ])  # fmt: skip
    print(
        f"\n[openvino int8] cosine min {cosine.min():.4f} p1 {np.percentile(cosine, 1):.4f} "
        f"median {np.median(cosine):.4f}; zero-shot agreement {agree:.4f}; held-out accuracy "
        f"{accuracy_reference:.4f} (torch) vs {accuracy_ours:.4f} (int8); top-10 overlap {overlap:.3f}"
    )
    assert cosine.min() >= 0.99
    assert agree >= 0.98
    assert abs(accuracy_reference - accuracy_ours) <= 0.01
    assert overlap >= 0.9


def test_the_default_export_measures_each_precision_here_and_records_the_fastest_that_passes(
    model_cache, export_dir, int8_dir
):
    """`export-model --backend openvino` (precision auto): both exports kept, every precision this CPU
    runs timed with one thread and gated against torch on held-out texts, the fastest that passes
    recorded with the CPU; a worker's `auto` serves it, and on another CPU it says to measure again."""
    from inference_tasks.ops.precision_report import precision_finding
    from inference_tasks.worker.runtimes.load_options import LoadOptions
    from inference_tasks.worker.runtimes.openvino.precision_choice import CHOICE_FILE, has_bf16, host_cpu, read_record
    from inference_tasks.worker.runtimes.registry import load_dense_encoder

    made = [(directory / IR_FILE).stat().st_mtime_ns for directory in (export_dir, int8_dir)]
    done = export(model_cache)
    try:
        assert done.returncode == 0, done.stderr
        # Both exports found and kept untouched (export-model is idempotent); only the measurement is new.
        assert done.stdout.count("already exported") == 2, done.stdout
        assert [(directory / IR_FILE).stat().st_mtime_ns for directory in (export_dir, int8_dir)] == made
        record = read_record(export_dir)
        cpu = host_cpu()
        assert record["cpu"] == cpu and record["timing"]["threads"] == 1 and record["timing"]["rounds"] == 1
        assert list(record["candidates"]) == ["f32", *(["bf16"] if has_bf16(cpu) else []), "int8"]
        passed = {name: row for name, row in record["candidates"].items() if row["passed"]}
        assert passed["f32"]["min_cosine"] >= 0.9999 and all(row["min_cosine"] >= 0.99 for row in passed.values())
        assert all(row["batch_texts_per_s"] > 0 and row["single_p50_ms"] > 0 for row in passed.values())
        assert record["winner"] == max(passed, key=lambda name: passed[name]["batch_texts_per_s"])
        assert f"precision: {record['winner']} is served by INFERENCE_OPENVINO_PRECISION=auto" in done.stdout
        served = load_dense_encoder("all-MiniLM-L6-v2", "cpu", LoadOptions("openvino", model_cache, "auto"))
        assert served.precision_setting == record["winner"]
        assert served.precision_choice["how"] == "measured" and cpu["model"] in served.precision_choice["why"]
        record["cpu"] = {"model": "Another CPU", "flags": ["avx512f"]}
        (export_dir / CHOICE_FILE).write_text(json.dumps(record))
        elsewhere = load_dense_encoder(
            "all-MiniLM-L6-v2", "cpu", LoadOptions("openvino", model_cache, "auto")
        ).precision_choice
        assert (
            elsewhere["how"] == "measured-elsewhere" and "export-model --backend openvino --force" in elsewhere["why"]
        )
        ok, detail, fix = precision_finding({"w1@host": {"precision_choice": elsewhere}})
        assert not ok and "w1@host serve" in detail and "--force" in fix
        explicit = load_dense_encoder(
            "all-MiniLM-L6-v2", "cpu", LoadOptions("openvino", model_cache, "f32")
        ).precision_choice
        assert explicit == {"precision": "f32", "how": "explicit", "why": "INFERENCE_OPENVINO_PRECISION=f32"}
    finally:
        (export_dir / CHOICE_FILE).unlink(missing_ok=True)  # the other tests serve `auto` unmeasured


def test_settings_refuse_what_cannot_work():
    with pytest.raises(ValueError, match="INFERENCE_BACKEND must be one of"):
        Settings.from_env({"INFERENCE_BACKEND": "onnx"})
    with pytest.raises(ValueError, match="INFERENCE_OPENVINO_PRECISION must be one of"):
        Settings.from_env({"INFERENCE_OPENVINO_PRECISION": "int4"})
    with pytest.raises(ValueError, match="runs on openvino \\(OpenVINO runtime\\), on the CPU only"):
        _ = Settings.from_env({"INFERENCE_BACKEND": "openvino", "INFERENCE_DEVICE": "cuda"}).served_model
    assert Settings.from_env({"INFERENCE_MODEL_CACHE": "/srv/models"}).model_cache_dir.as_posix() == "/srv/models"


@pytest.mark.worker
@pytest.mark.timeout(300)
def test_a_worker_serves_from_openvino_with_one_thread_per_child(start_worker, model_cache, export_dir):
    """Real worker, INFERENCE_BACKEND=openvino: the IR is read in the main process, each child compiles
    after the fork with one thread; embed equals a fresh process's OpenVINO vectors (fork safety);
    worker_info and the control command report backend and precision; zero-shot and a head trained on
    this worker classify."""
    worker = start_worker(
        concurrency=2, backend="openvino", model_cache=str(model_cache), queues=f"inference,{TRAINING_QUEUE}"
    )
    texts = ["Red running shoes", "My parcel never arrived", "ok"]
    served = np.array(worker.app.send_task(EMBED_TASK, args=[texts]).get(timeout=RESULT_TIMEOUT_S)["embeddings"])
    fresh = compiled_encoder(export_dir, "auto").encode(texts, normalize=True)
    assert np.abs(served - fresh).max() <= 1e-6
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert (info["backend"], info["runtime_threads"], info["model_load_mode"]) == ("openvino", 1, "preloaded")
    assert "openvino" in info["loaded_runtimes"] and "sentence_transformers" not in info["loaded_runtimes"]
    assert info["precision"] in ("bf16", "f32")
    assert info["runtime_tuning"] == host_tuning(info["precision"], host_cpu())  # Snippets off on AMX, bf16
    assert info["os_threads"] <= 4, info  # main thread, one inference thread, a few idle runtime threads
    report = worker_report(worker.app)
    assert report["backend"] == "openvino"
    assert [child["precision"] for child in report["children"]] == [info["precision"]] * 2
    assert [child["compute_threads"] for child in report["children"]] == [1, 1]
    zero_shot = worker.app.send_task(CLASSIFY_TASK, args=[["I was charged twice"], ["billing", "shipping"]])
    assert zero_shot.get(timeout=RESULT_TIMEOUT_S)[0]["label"] == "billing"
    trained = worker.app.send_task(
        TRAIN_CLASSIFIER_TASK,
        kwargs={"name": "ov-head", "texts": [r["text"] for r in TICKETS], "labels": [r["label"] for r in TICKETS]},
        queue=TRAINING_QUEUE,
    ).get(timeout=RESULT_TIMEOUT_S)
    assert (trained["backend"], trained["precision"]) == ("openvino", info["precision"])
    assert trained["metrics"]["held_out_accuracy"] >= 0.9
    labels = worker.app.send_task(
        CLASSIFY_TASK, args=[["My parcel never arrived and tracking is broken."]], kwargs={"classifier": "ov-head"}
    ).get(timeout=RESULT_TIMEOUT_S)
    assert labels[0]["label"] == "shipping"
    assert f"openvino backend, {info['precision']} precision" in worker.log()
    # The operator's view: doctor's runtime column and the exporter's per-child runtime series.
    doctor = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "doctor", "--skip-model"],
        cwd=REPO_ROOT,
        env=clean_env(REDIS_URL=worker.redis_url, COLUMNS="250"),  # one table row per worker, unwrapped
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f"openvino {info['precision']}" in doctor.stdout, doctor.stdout
    with exporter(worker.redis_url) as port:
        series = {labels for (name, labels), value in scrape(port).items() if name == "inference_child_runtime_info"}
    assert {dict(labels)["backend"] for labels in series} == {"openvino"}
    assert {dict(labels)["precision"] for labels in series} == {info["precision"]}


@pytest.mark.worker
def test_a_worker_without_the_export_stops_at_start_naming_the_command(start_worker, tmp_path):
    worker = start_worker(backend="openvino", model_cache=str(tmp_path / "empty"), wait_ready=False)
    wait_until(lambda: worker.process.poll() is not None, 120, "the worker to stop")
    assert worker.process.returncode != 0
    log = worker.log()
    assert "has no OpenVINO export" in log and "inference-tasks export-model --backend openvino" in log
    assert "ready." not in log
    assert os.path.isdir(tmp_path) and not (tmp_path / "empty" / "openvino").exists()


@pytest.mark.worker
@pytest.mark.timeout(300)
def test_a_worker_serves_the_measured_int8_and_says_why(start_worker, model_cache, export_dir, int8_dir):
    """INFERENCE_OPENVINO_PRECISION=auto with a measurement that chose int8 on this CPU (written here, so the
    test does not depend on which precision wins on the host): the same lifecycle (read in the main
    process, compiled per child after the fork, one thread, preloaded); vectors equal a fresh process's
    int8 vectors; worker_info, the control command, doctor and the exporter say int8, measured."""
    from inference_tasks.worker.runtimes.openvino.precision_choice import CHOICE_FILE, host_cpu, write_record

    row = {"passed": True, "min_cosine": 0.996, "batch_texts_per_s": 200.0, "single_p50_ms": 5.0}
    candidates = {"f32": {**row, "batch_texts_per_s": 100.0}, "int8": row}
    write_record(export_dir, {"winner": "int8", "cpu": host_cpu(), "candidates": candidates})
    try:
        worker = start_worker(concurrency=1, backend="openvino", model_cache=str(model_cache))
    finally:
        (export_dir / CHOICE_FILE).unlink()  # read at the worker's start; the other tests serve `auto` unmeasured
    texts = ["Red running shoes", "My parcel never arrived", "ok"]
    served = np.array(worker.app.send_task(EMBED_TASK, args=[texts]).get(timeout=RESULT_TIMEOUT_S)["embeddings"])
    fresh = compiled_encoder(int8_dir, "int8").encode(texts, normalize=True)
    assert np.abs(served - fresh).max() <= 1e-6
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert (info["backend"], info["precision"], info["runtime_threads"]) == ("openvino", "int8", 1)
    assert info["model_load_mode"] == "preloaded"
    assert [child["precision"] for child in worker_report(worker.app)["children"]] == ["int8"]
    zero_shot = worker.app.send_task(CLASSIFY_TASK, args=[["I was charged twice"], ["billing", "shipping"]])
    assert zero_shot.get(timeout=RESULT_TIMEOUT_S)[0]["label"] == "billing"
    assert "openvino backend, int8 precision" in worker.log()
    assert info["precision_choice"]["how"] == "measured" and "int8 200/s" in info["precision_choice"]["why"]
    assert worker_report(worker.app)["precision_choice"] == info["precision_choice"]
    doctor = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "doctor", "--skip-model"],
        cwd=REPO_ROOT, env=clean_env(REDIS_URL=worker.redis_url, COLUMNS="250"), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert "openvino precision" in doctor.stdout and "int8 (measured" in doctor.stdout, doctor.stdout
    with exporter(worker.redis_url) as port:
        series = [
            dict(labels) for (name, labels), _ in scrape(port).items() if name == "inference_worker_precision_info"
        ]
    assert [(labels["precision"], labels["how"]) for labels in series] == [("int8", "measured")]

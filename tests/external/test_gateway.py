"""`inference-tasks gateway` in front of a real worker: the official OpenAI client (in a venv of its own),
curl, and the refusals a production gateway owes its callers (401, 404, 400, 413, 429, 504)."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

from inference_tasks import client
from tests.support.gateway import GATEWAY, openai_client_calls, running_gateway
from tests.support.local import clean_env, redis_client
from tests.support.localstack import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
KEY = "test-key-1"
TEXTS = ["My card was charged twice for one order", "How do I reset my password?", "Ship it to Lisbon"]


@pytest.fixture(scope="module")
def gateway(inference_worker, tmp_path_factory):
    """A gateway with two keys on the session worker's Redis, serving the default model."""
    log_dir = tmp_path_factory.mktemp("gateway")
    settings = {"INFERENCE_GATEWAY_API_KEYS": f"{KEY}, second-key", "INFERENCE_GATEWAY_MODELS": "minilm",
                "INFERENCE_GATEWAY_MAX_BODY_BYTES": "20000"}  # fmt: skip
    with running_gateway(inference_worker.redis_url, log_dir, **settings) as running:
        yield running


def cosines(left, right) -> np.ndarray:
    left, right = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    return (left * right).sum(axis=1) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)


def test_the_official_openai_client_gets_the_vectors_a_celery_task_gives(gateway, inference_worker):
    """openai's own client, its default (base64, decoded by the client), float and raw base64, dimensions:
    the vectors of inference.embed sent straight to Celery; its typed errors for a wrong key, an unknown
    model and an empty input."""
    report = openai_client_calls({"base_url": f"{gateway.base_url}/v1", "api_key": KEY, "texts": TEXTS,
                                  "model": "minilm"})  # fmt: skip
    direct = client.embed(inference_worker.app, TEXTS, model="minilm")["embeddings"]
    short = client.embed(inference_worker.app, TEXTS[:1], model="minilm", dimensions=128)["embeddings"]
    assert report["project_importable"] is False
    decoded = [np.frombuffer(__import__("base64").b64decode(text), dtype="<f4") for text in report["base64"]]
    for form in (report["default"], report["float"], decoded):
        assert cosines(form, direct).min() >= 0.9999
    assert len(report["short"]) == 128 and cosines([report["short"]], short).min() >= 0.9999
    assert report["indexes"] == [0, 1, 2] and report["model"] == "minilm"
    assert report["usage"]["prompt_tokens"] > len(TEXTS) and report["models"] == ["minilm"]
    assert report["wrong_key"]["class"] == "AuthenticationError" and report["wrong_key"]["status"] == 401
    unknown = report["unknown_model"]
    assert unknown["class"] == "NotFoundError" and "no-such-model" in unknown["body"]["message"]
    assert "minilm" in unknown["body"]["message"] and unknown["body"]["param"] == "model"
    for refused in (report["empty_input"], report["blank_input"]):
        assert refused["class"] == "BadRequestError" and refused["body"]["param"] == "input"
    assert "input is empty" in report["empty_input"]["body"]["message"]


def curl(gateway, *args: str) -> tuple[int, dict]:
    done = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True, timeout=60, check=True)
    body, _, status = done.stdout.decode().rpartition("\n")
    return int(status), json.loads(body)


def test_curl_reranks_lists_models_and_reads_health(gateway):
    """The Cohere/Jina rerank shape, the model list and readiness, as a shell script would call them."""
    auth = ["-H", f"Authorization: Bearer {KEY}"]
    status, found = curl(gateway, *auth, "-H", "Content-Type: application/json", "-d", json.dumps({
        "model": "minilm", "query": "I was billed two times", "documents": [TEXTS[1], {"text": TEXTS[0]}, TEXTS[2]],
        "top_n": 2, "return_documents": True}), f"{gateway.base_url}/v1/rerank")  # fmt: skip
    assert status == 200, found
    assert found["results"][0]["index"] == 1 and len(found["results"]) == 2
    assert found["results"][0]["document"] == {"text": TEXTS[0]}
    assert found["results"][0]["relevance_score"] >= found["results"][1]["relevance_score"]
    assert found["usage"]["total_tokens"] > 0
    status, models = curl(gateway, *auth, f"{gateway.base_url}/v1/models")
    assert status == 200 and [item["id"] for item in models["data"]] == ["minilm"]
    status, health = curl(gateway, f"{gateway.base_url}/health")
    assert status == 200 and health["status"] == "ready" and health["models"]["minilm"]


def test_refusals_name_what_was_wrong(gateway, inference_worker):
    """401 without a key, 413 past the body limit (said or streamed), 400 for token arrays and a bad
    dimensions, a task's own InvalidInput as a 400; no result of this test's left in the results' Redis
    once the gateway's batched UNLINK has run (the session's Redis holds what earlier tests stored)."""
    results = redis_client(inference_worker.redis_url)
    stored_before = set(results.keys("celery-task-meta-*"))
    assert gateway.request("POST", "/v1/embeddings", {"input": "x"})[0] == 401
    assert gateway.request("GET", "/v1/models", key="second-key")[0] == 200
    status, _, error = gateway.request("POST", "/v1/embeddings", {"input": ["x" * 30000]}, key=KEY)
    assert status == 413 and "INFERENCE_GATEWAY_MAX_BODY_BYTES" in error["error"]["message"]
    status, _, error = gateway.request("POST", "/v1/embeddings", {"input": [[101, 2023]]}, key=KEY)
    assert status == 400 and "token arrays" in error["error"]["message"]
    status, _, error = gateway.request("POST", "/v1/embeddings", {"input": "x", "dimensions": 999}, key=KEY)
    assert status == 400 and "dimensions" in error["error"]["message"] and "384" in error["error"]["message"]
    status, _, error = gateway.request("POST", "/v1/embeddings", raw=b"[1, 2", key=KEY)
    assert status == 400 and "not JSON" in error["error"]["message"]
    wait_until(
        lambda: not set(results.keys("celery-task-meta-*")) - stored_before, 10, "the failed task's result unlinked"
    )


def test_a_full_queue_is_429_and_a_silent_fleet_is_504(fresh_redis_url, tmp_path):
    """No worker on this database, and the gateway told to wait for a pool scaling from zero
    (INFERENCE_GATEWAY_SCALE_WAIT_S): the first request is pushed and times out (504, naming both waits),
    leaving its task queued, so the queue is at its limit of one and the next is refused with Retry-After;
    /health names the model."""
    url = fresh_redis_url()
    with running_gateway(url, tmp_path, "--no-auth", INFERENCE_GATEWAY_MODELS="minilm",
                         INFERENCE_GATEWAY_MAX_QUEUE_DEPTH="1", INFERENCE_GATEWAY_TIMEOUT_S="1",
                         INFERENCE_GATEWAY_SCALE_WAIT_S="1", INFERENCE_GATEWAY_HEALTH_TTL_S="0") as silent:  # fmt: skip
        status, _, error = silent.request("POST", "/v1/embeddings", {"model": "minilm", "input": "x"})
        assert status == 504 and "INFERENCE_GATEWAY_SCALE_WAIT_S" in error["error"]["message"], error
        status, headers, error = silent.request("POST", "/v1/embeddings", {"model": "minilm", "input": "x"})
        assert status == 429 and headers["Retry-After"] == "1" and "inference.minilm" in error["error"]["message"]
        assert redis_client(url).llen("inference.minilm") == 1
        status, _, health = silent.request("GET", "/health")
        assert status == 503 and health["missing"] == ["minilm"]


def test_the_whole_catalogue_is_ready_with_the_default_worker_alone(inference_worker, tmp_path):
    """`inference-tasks gateway` with no model list in front of the default worker alone: /health is 200 (the
    built-in multilingual model has no worker and is not required) and says which models have none, /v1/models
    marks it not ready, and a request for it is refused at once (503 model_unavailable, Retry-After), nothing
    pushed, instead of waiting INFERENCE_GATEWAY_TIMEOUT_S. Routing's 404 and 405 are OpenAI's error shape."""
    broker = redis_client(inference_worker.redis_url)
    with running_gateway(inference_worker.redis_url, tmp_path, "--no-auth") as gateway:
        status, _, health = gateway.request("GET", "/health")
        assert status == 200 and health["status"] == "ready" and health["required"] == ["minilm"], health
        assert health["models"]["minilm"] and health["models"]["multilingual"] == [], health
        assert "multilingual" in health["unserved"] and "minilm" not in health["unserved"]
        status, _, models = gateway.request("GET", "/v1/models")
        ready = {model["id"]: (model["ready"], model["workers"] > 0) for model in models["data"]}
        assert ready["minilm"] == (True, True) and ready["multilingual"] == (False, False), ready
        started = time.monotonic()
        status, headers, error = gateway.request("POST", "/v1/embeddings", {"model": "multilingual", "input": "안녕"})
        took = time.monotonic() - started
        assert status == 503 and error["error"]["code"] == "model_unavailable" and headers["Retry-After"] == "1"
        assert "inference.multilingual" in error["error"]["message"] and took < 10, (took, error)  # not the 30 s
        print(f"\n[gateway] a model with no worker refused in {took:.2f} s")
        assert broker.llen("inference.multilingual") == 0
        status, _, error = gateway.request("GET", "/v2/no-such-route")
        assert status == 404 and error["error"]["code"] == "not_found" and "/v1/embeddings" in error["error"]["message"]
        status, headers, error = gateway.request("PUT", "/v1/embeddings", {"input": "x"})
        assert status == 405 and error["error"]["code"] == "method_not_allowed" and "POST" in headers["Allow"]
        assert error["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--host", "0.0.0.0"], "INFERENCE_GATEWAY_API_KEYS"), (["--host", "0.0.0.0", "--no-auth"], "loopback")],
)
def test_the_gateway_will_not_serve_without_keys_off_loopback(args, said):
    done = subprocess.run([*GATEWAY, *args], capture_output=True, timeout=60, cwd=REPO_ROOT, env=clean_env())
    assert done.returncode == 2 and said in done.stderr.decode()

"""`inference-tasks gateway` in front of a real worker: the official OpenAI client (in a venv of its own),
curl, and the refusals a production gateway owes its callers (401, 404, 400, 413, 429, 504)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest

from inference_tasks import client
from inference_tasks.redis_access.keys import queue_keys, tenant_keys
from tests.support.gateway import GATEWAY, openai_client_calls, running_gateway
from tests.support.local import clean_env, redis_client
from tests.support.localstack import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
CLI = GATEWAY[:-1]  # python -m inference_tasks.ops.cli
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


TENANTS_FILE = """
[tenants.alpha]
keys = ["alpha-key"]
requests_per_minute = 3
models = ["minilm"]

[tenants.beta]
key_sha256 = ["{beta_digest}"]
tokens_per_minute = 30

[tenants.gamma]
keys = ["gamma-key"]
max_in_flight = 1

[tenants.delta]
keys = ["delta-key"]
requests_per_minute = 2
"""


def test_tenants_limits_hold_across_two_gateways_and_usage_adds_up(inference_worker, tmp_path):
    """Two gateway processes on one Redis with one tenants file: each limit refuses exactly past its edge whichever
    gateway a request reaches (requests per minute, tokens per minute, requests in flight, a model not allowed),
    with 429 (or 403), Retry-After and the limit named; the official OpenAI client raises RateLimitError naming
    it; `inference-tasks usage` sums both gateways' counts; the tenant rides in the task's headers; no key is in
    /metrics or the logs."""
    broker = redis_client(inference_worker.redis_url)
    path = tmp_path / "tenants.toml"
    path.write_text(TENANTS_FILE.format(beta_digest=hashlib.sha256(b"beta-key").hexdigest()))
    settings = {"INFERENCE_GATEWAY_TENANTS_FILE": str(path), "INFERENCE_GATEWAY_TIMEOUT_S": "10",
                "INFERENCE_GATEWAY_SCALE_WAIT_S": "1"}  # fmt: skip
    before = usage_of(inference_worker.redis_url)
    with (
        running_gateway(inference_worker.redis_url, tmp_path, **settings) as one,
        running_gateway(inference_worker.redis_url, tmp_path, **settings) as two,
    ):
        both = [one, two, one, two, one]
        embed = {"model": "minilm", "input": TEXTS[0]}
        answers = [gateway.request("POST", "/v1/embeddings", embed, key="alpha-key") for gateway in both[:4]]
        assert [status for status, _, _ in answers] == [200, 200, 200, 429], answers
        status, headers, error = answers[3]
        assert error["error"]["param"] == "requests_per_minute" and "limit of 3" in error["error"]["message"]
        assert int(headers["Retry-After"]) >= 1
        elsewhere = {"model": "multilingual", "input": "x"}
        status, _, error = two.request("POST", "/v1/embeddings", elsewhere, key="alpha-key")
        assert status == 403 and error["error"]["code"] == "model_not_allowed", error
        assert [model["id"] for model in one.request("GET", "/v1/models", key="alpha-key")[2]["data"]] == ["minilm"]

        tokens, statuses = [], []
        for gateway in both * 2:  # ~10 tokens a request against 30 a minute
            status, _, body = gateway.request("POST", "/v1/embeddings", embed, key="beta-key")
            statuses.append(status)
            if status != 200:
                assert body["error"]["param"] == "tokens_per_minute", body
                break
            tokens.append(body["usage"]["total_tokens"])
        # Admitted while any of the 30 remained (plus what refilled meanwhile, half a token a second); refused after.
        assert statuses[-1] == 429 and sum(tokens[:-1]) < 30 + 5 <= sum(tokens) + 5, (tokens, statuses)

        slow = threading.Thread(target=lambda: one.request("POST", "/v1/embeddings", elsewhere, key="gamma-key"))
        slow.start()  # no worker serves multilingual: it waits INFERENCE_GATEWAY_SCALE_WAIT_S + TIMEOUT_S, in flight
        in_flight = tenant_keys("gamma")[1]
        wait_until(lambda: broker.zcard(in_flight) == 1, 30, "gamma's request in flight")
        status, _, error = two.request("POST", "/v1/embeddings", embed, key="gamma-key")
        assert status == 429 and error["error"]["param"] == "max_in_flight", error
        slow.join(timeout=60)
        assert broker.zcard(in_flight) == 0  # freed when it ended (a 504)
        broker.delete(*queue_keys("inference.multilingual"))

        report = openai_client_calls({"base_url": f"{two.base_url}/v1", "api_key": "unused", "model": "minilm",
                                      "limited_key": "delta-key"})  # fmt: skip
        assert report["calls"] == 3 and report["class"] == "RateLimitError" and report["status"] == 429, report
        assert "requests_per_minute limit of 2" in report["body"]["message"]

        metrics = "".join(
            urllib.request.urlopen(f"{g.base_url}/metrics", timeout=10).read().decode() for g in (one, two)
        )
        assert 'inference_gateway_requests_total{model="minilm",tenant="alpha"} 2.0' in metrics, metrics
        logs = one.log.read_text() + two.log.read_text()
    usage = usage_of(inference_worker.redis_url)
    grown = {key: value - before.get(key, 0) for key, value in usage.items() if value != before.get(key, 0)}
    assert grown["alpha|minilm|requests"] == 3 and grown["alpha|minilm|refused_requests_per_minute"] == 1
    assert grown["alpha|multilingual|refused_model_not_allowed"] == 1
    assert grown["beta|minilm|tokens"] == sum(tokens) and grown["beta|minilm|refused_tokens_per_minute"] == 1
    assert grown["gamma|minilm|refused_max_in_flight"] == 1 and grown["gamma|multilingual|refused_timeout"] == 1
    assert grown["delta|minilm|requests"] == 2
    for key in ("alpha-key", "beta-key", "gamma-key", "delta-key"):
        assert key not in metrics and key not in logs


def usage_of(redis_url: str) -> dict[str, int]:
    """`inference-tasks usage --json --since 1h`, flattened to "tenant|model|what" -> count."""
    done = subprocess.run([*CLI, "usage", "--json", "--since", "2h"], env=clean_env(REDIS_URL=redis_url),
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return {f"{row['tenant']}|{row['model']}|{what}": n for row in json.loads(done.stdout)
            for what, n in row.items() if what not in ("tenant", "model")}  # fmt: skip


def test_a_bad_tenants_file_stops_the_gateway_at_start_naming_the_line(tmp_path):
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants.alpha]\nkeys = ["a"]\ntokens_per_minute = -5\n')
    done = subprocess.run([*GATEWAY, "--port", "1"], env=clean_env(INFERENCE_GATEWAY_TENANTS_FILE=str(path)),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{path}, line 3: tenants.alpha.tokens_per_minute: must be a whole number" in done.stderr

"""The gateway's pieces without a server: request checks, response shapes, model names, keys, readiness,
and the message it pushes, which a worker's screening must accept."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from inference_tasks.app import broker_transport_options
from inference_tasks.broker.envelope import screen
from inference_tasks.broker.limits import limits_from_options
from inference_tasks.config import ConfigError, Settings
from inference_tasks.config.catalogue import Catalogue, ModelEntry
from inference_tasks.config.gateway import GatewaySettings
from inference_tasks.config.tenants import Tenant, Tenants, key_digest, load_tenants
from inference_tasks.gateway import embeddings_api, models_api, rerank_api
from inference_tasks.gateway.auth import auth_problem, check_bearer
from inference_tasks.gateway.dispatch import failure
from inference_tasks.gateway.errors import ApiError
from inference_tasks.gateway.health import FleetHealth, served_models
from inference_tasks.gateway.wire import task_message
from inference_tasks.integrations.embedding_calls import first_of, model_prompts
from inference_tasks.ops.usage import since_hours, usage_table

SETTINGS = Settings()
MINILM = ModelEntry("minilm")
CATALOGUE = Catalogue(
    {"minilm": MINILM, "rerank": ModelEntry("rerank", "/m/ms-marco", kind="cross-encoder"),
     "splade": ModelEntry("splade", "org/splade-tiny", kind="sparse")},
    "minilm",
)  # fmt: skip


def refused(call, *args) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args)
    return caught.value


@pytest.mark.parametrize(
    ("body", "param", "said"),
    [
        ({"input": []}, "input", "input is empty"),
        ({"input": ""}, "input", "input[0] is empty or blank"),
        ({"input": [1, 2, 3]}, "input", "token arrays"),
        ({"input": [[1, 2], [3]]}, "input", "token arrays"),
        ({"input": {"text": "x"}}, "input", "input must be a list of strings"),
        ({"input": ["x"] * 257}, "input", "257 input is more than the limit of 256"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format", "one of float, base64"),
        ({"input": "x", "dimensions": 0}, "dimensions", "1 or more"),
        ({"input": "x", "dimensions": True}, "dimensions", "1 or more"),
        ({"input": "x", "dimensions": "64"}, "dimensions", "1 or more"),
    ],
)
def test_embeddings_requests_are_checked_as_tasks_are(body, param, said):
    error = refused(embeddings_api.parse, body, MINILM, SETTINGS)
    assert error.status == 400 and error.param == param and said in error.message


def test_an_embeddings_request_becomes_an_f32_task_and_its_vectors_come_back_per_input():
    asked = embeddings_api.parse({"input": "one", "dimensions": 2}, MINILM, SETTINGS)
    assert asked.texts == ["one"] and asked.task_kwargs() == {"normalize": True, "encoding": "f32-base64",
                                                               "dimensions": 2}  # fmt: skip
    rows = np.array([[0.6, 0.8], [1.0, 0.0]], dtype="<f4")
    result = {"embeddings": base64.b64encode(rows.tobytes()).decode(), "dim": 2, "count": 2, "usage": {"tokens": 5}}
    floats = orjson.loads(embeddings_api.response(result, embeddings_api.parse({"input": ["a", "b"]}, MINILM,
                                                                              SETTINGS), "minilm"))  # fmt: skip
    # JSON carries each float32 in its shortest form: read back as float32, the same numbers.
    assert np.array_equal(np.array([item["embedding"] for item in floats["data"]], dtype="<f4"), rows)
    assert floats["usage"]["prompt_tokens"] == 5
    raw = json.loads(embeddings_api.response(result, embeddings_api.EmbeddingsRequest(["a", "b"], "base64", None), "m"))
    assert [np.frombuffer(base64.b64decode(item["embedding"]), "<f4").tolist() for item in raw["data"]] == rows.tolist()
    assert [item["index"] for item in raw["data"]] == [0, 1] and raw["object"] == "list"


def test_models_are_found_by_alias_source_or_the_sources_last_part_and_by_what_they_serve():
    refuse = "inference.embed"
    assert models_api.resolve(CATALOGUE, None, refuse) is MINILM
    for name in ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert models_api.resolve(CATALOGUE, name, refuse) is MINILM
    unknown = refused(models_api.resolve, CATALOGUE, "gpt-4", refuse)
    assert unknown.status == 404 and unknown.code == "model_not_found"
    assert "minilm (all-MiniLM-L6-v2)" in unknown.message
    wrong_kind = refused(models_api.resolve, CATALOGUE, "rerank", refuse)
    assert wrong_kind.status == 400 and "it does not serve inference.embed" in wrong_kind.message
    assert refused(models_api.resolve, CATALOGUE, "splade", "inference.rerank").status == 400
    assert models_api.resolve(CATALOGUE, "rerank", "inference.rerank").alias == "rerank"
    listed = models_api.models_list(CATALOGUE, {"minilm": ["inference@a", "inference@b"]})["data"]
    assert (listed[0]["id"], listed[0]["kind"], listed[0]["default"]) == ("minilm", "embedding", True)
    assert (listed[0]["workers"], listed[0]["ready"]) == (2, True)
    assert all((model["workers"], model["ready"]) == (0, False) for model in listed[1:]), listed


def test_rerank_requests_take_strings_or_text_objects():
    asked = rerank_api.parse({"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1}, MINILM, SETTINGS)
    assert asked.task_args() == ["q", ["a", "b"]] and asked.task_kwargs() == {"return_documents": False, "top_n": 1}
    answer = rerank_api.response({"results": [{"index": 1, "relevance_score": 0.9}], "usage": {"tokens": 3}},
                                 rerank_api.RerankRequest("q", ["a", "b"], 1, True), "minilm")  # fmt: skip
    assert answer["results"] == [{"index": 1, "relevance_score": 0.9, "document": {"text": "b"}}]
    bad = [({"documents": ["a"]}, "query"), ({"query": "q", "documents": []}, "documents"),
           ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
           ({"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents")]  # fmt: skip
    for body, param in bad:
        assert refused(rerank_api.parse, body, MINILM, SETTINGS).param == param


def test_keys_are_bearer_tokens_and_no_keys_is_for_loopback_only():
    """The comma-separated keys are the unlimited tenant `default`; a wrong or missing key is 401."""
    keys = load_tenants(None, ("k1", "k2"))
    assert check_bearer("Bearer k2", keys) == Tenant("default")
    assert check_bearer(None, Tenants()) == Tenant("default")
    for header in (None, "Bearer", "Basic k1", "Bearer k3"):
        assert refused(check_bearer, header, keys).status == 401
    assert auth_problem(keys, False, "0.0.0.0") is None
    assert auth_problem(Tenants(), True, "127.0.0.1") is None and auth_problem(Tenants(), True, "::1") is None
    assert "loopback" in auth_problem(Tenants(), True, "0.0.0.0")
    assert "INFERENCE_GATEWAY_API_KEYS" in auth_problem(Tenants(), False, "127.0.0.1")


TENANTS = """
[tenants.search]
keys = ["sk-search"]
requests_per_minute = 600
tokens_per_minute = 200000
max_in_flight = 32
models = ["minilm"]

[tenants.batch]
key_sha256 = ["{digest}"]
"""


def test_a_tenants_file_gives_each_key_its_tenant_limits_and_models(tmp_path: Path):
    """Keys in clear or as their sha256; every limit optional; the old keys stay the unlimited `default`."""
    path = tmp_path / "tenants.toml"
    path.write_text(TENANTS.format(digest=key_digest("sk-batch")))
    tenants = load_tenants(path, ("old-key",))
    search = check_bearer("Bearer sk-search", tenants)
    assert search == Tenant("search", ("minilm",), 600, 200_000, 32) and search.limited
    assert check_bearer("Bearer sk-batch", tenants) == Tenant("batch") and not Tenant("batch").limited
    assert check_bearer("Bearer old-key", tenants).name == "default"
    assert tenants.names == ["batch", "default", "search"]
    assert "sk-search" not in repr(tenants) and "sk-batch" not in repr(tenants)  # digests only


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '[tenants.a]\nkeys = ["k"]\nrequests_per_minute = 0\n',
            "line 3: tenants.a.requests_per_minute: must be",
        ),
        ('[tenants.a]\nkeys = ["k"]\nmax_in_flight = "8"\n', "line 3: tenants.a.max_in_flight"),
        ('[tenants.a]\nkeys = ["k"]\n\n[tenants.b]\nkeys = ["k"]\n', "line 5: tenants.b: a key is also 'a'"),
        ('[tenants.a]\nmodels = ["minilm"]\n', "line 1: tenants.a.keys: no key"),
        ('[tenants.a]\nkeys = ["k"]\nrpm = 5\n', "line 3: tenants.a.rpm: unknown field"),
        ('[tenants.a]\nkey_sha256 = ["abc"]\n', "line 2: tenants.a.key_sha256"),
        ('[tenants.a]\nkeys = ["k"]\nmodels = []\n', "line 3: tenants.a.models: an empty list allows no model"),
        ('[tenants."a b"]\nkeys = ["k"]\n', "line 1: tenants.a b: a tenant's name"),
        ('[tenants.default]\nkeys = ["k"]\n', "tenants.default: the name is taken"),
        ("[tenants.a\n", "not valid TOML"),
        ("", "no tenants"),
    ],
)
def test_a_bad_tenants_file_is_refused_naming_the_line_and_field(tmp_path: Path, text: str, said: str):
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(said)):
        load_tenants(path, ("old-key",))


def test_gateway_settings_come_from_the_environment_and_refuse_nonsense():
    options = GatewaySettings.from_env({"INFERENCE_GATEWAY_API_KEYS": " a, ,b ", "INFERENCE_GATEWAY_TIMEOUT_S": "2.5",
                                        "INFERENCE_GATEWAY_MODELS": "minilm,e5"})  # fmt: skip
    assert options.keys == ("a", "b") and options.timeout_s == 2.5 and options.model_aliases == ("minilm", "e5")
    assert GatewaySettings().model_aliases is None and GatewaySettings().required_aliases is None
    assert GatewaySettings.from_env({"INFERENCE_GATEWAY_REQUIRED_MODELS": "e5"}).required_aliases == ("e5",)
    with pytest.raises(ConfigError, match="INFERENCE_GATEWAY_SCALE_WAIT_S must be 0 or more"):
        GatewaySettings.from_env({"INFERENCE_GATEWAY_SCALE_WAIT_S": "-1"})
    with pytest.raises(ConfigError, match="INFERENCE_GATEWAY_MAX_QUEUE_DEPTH must be above 0"):
        GatewaySettings.from_env({"INFERENCE_GATEWAY_MAX_QUEUE_DEPTH": "0"})
    with pytest.raises(ConfigError, match="is not a number"):
        GatewaySettings.from_env({"INFERENCE_GATEWAY_TIMEOUT_S": "soon"})


def test_readiness_is_a_worker_consuming_each_models_queue():
    replies = {"a@h": [{"name": "inference"}, {"name": "inference.minilm"}], "b@h": [{"name": "inference.e5"}]}
    assert served_models(replies, ("minilm", "e5", "rerank")) == {"minilm": ["a@h"], "e5": ["b@h"], "rerank": []}


class Fleet:
    """Stands in for Celery's control API in the unit tier: the queues each node consumes, and the broadcasts asked."""

    def __init__(self, replies: dict[str, list[dict[str, str]]]) -> None:
        self.replies, self.broadcasts = replies, 0
        self.control = self

    def inspect(self, timeout: float) -> Fleet:
        return self

    def active_queues(self) -> dict[str, list[dict[str, str]]]:
        self.broadcasts += 1
        return self.replies


def test_ready_needs_the_required_models_and_a_request_asks_again_only_for_a_model_with_no_worker():
    """/health is ready when the required models have a worker, whatever the others; a request for a model with a
    worker never waits for a broadcast; one with none is asked about again, at most once per RECHECK_S."""
    fleet = Fleet({"a@h": [{"name": "inference.minilm"}]})
    health = FleetHealth(fleet, ("minilm", "multilingual"), ("minilm",), ttl_s=60)

    async def scenario() -> tuple[dict, list[str], list[str], int]:
        report = await health.report()
        present = await health.workers("minilm")
        absent = await health.workers("multilingual")  # the first answer is fresh: trusted
        return report, present, absent, fleet.broadcasts

    report, present, absent, broadcasts = asyncio.run(scenario())
    assert report["status"] == "ready" and report["missing"] == [] and report["unserved"] == ["multilingual"]
    assert (present, absent, broadcasts) == (["a@h"], [], 1)
    strict = FleetHealth(fleet, ("minilm", "multilingual"), ("minilm", "multilingual"), ttl_s=60)
    assert asyncio.run(strict.report())["missing"] == ["multilingual"]
    stale = FleetHealth(fleet, ("minilm", "multilingual"), ("minilm",), ttl_s=0)  # every answer already stale
    fleet.broadcasts = 0
    asyncio.run(stale.workers("multilingual"))
    asyncio.run(stale.workers("multilingual"))
    assert fleet.broadcasts == 2


def test_the_pushed_message_passes_a_workers_screening_as_json():
    raw = task_message("inference.embed", [["hello"]], {"model": "minilm"}, "id-1", "inference.minilm")
    screening = screen(raw, limits_from_options(broker_transport_options(SETTINGS)))
    assert screening.accepted, screening
    assert json.loads(raw)["properties"]["delivery_info"]["routing_key"] == "inference.minilm"


def test_a_stored_failure_becomes_task_failed_with_its_type():
    failed = failure("t", {"status": "FAILURE", "result": {"exc_type": "InvalidInput", "exc_message": ["bad", "x"]}})
    assert (failed.remote_type, failed.message) == ("InvalidInput", "bad x")
    assert failure("t", {"status": "REVOKED", "result": None}).remote_type == "REVOKED"


def test_adapters_take_query_and_document_prompts_from_the_catalogue(tmp_path: Path):
    (tmp_path / "e5").mkdir()
    models = tmp_path / "models.toml"
    models.write_text(
        f'[models.e5]\nsource = "{tmp_path / "e5"}"\nprompts = {{ query = "query: ", passage = "p: " }}\n'
    )

    class Producer:
        settings = Settings(models_file=str(models))

    prompts = model_prompts(Producer(), "e5")
    assert first_of(("query",), prompts) == "query" and first_of(("document", "passage"), prompts) == "passage"
    assert model_prompts(Producer(), "minilm") == {} and model_prompts(Producer(), "unknown") == {}


def test_the_gateway_process_imports_no_model_code():
    """The gateway holds no model: building its app imports neither torch nor any worker module."""
    code = (
        "import sys; from inference_tasks.ops.cli import main; from inference_tasks.gateway.app import build_app; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers', 'sentence_transformers'}"
        " or m.startswith('inference_tasks.worker')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_usage_reads_the_hours_asked_and_sums_them():
    """--since covers whole UTC hours up to now; refusals are listed by reason; a bad --since names what is allowed."""
    now = 1_796_000_000.0  # a fixed instant: hour 2026-11-29 (UTC)
    hours = since_hours("3h", now)
    assert len(hours) == 3 and hours[-1] == time.strftime("%Y%m%d%H", time.gmtime(now))
    assert len(since_hours("2d", now)) == 48
    for bad in ("24", "0h", "1w", "36d"):
        with pytest.raises(ValueError, match="--since"):
            since_hours(bad, now)
    rows = usage_table({("search", "minilm"): {"requests": 3, "tokens": 40, "refused_max_in_flight": 2}})
    assert rows == [["search", "minilm", "3", "0", "40", "0", "max_in_flight=2"]]

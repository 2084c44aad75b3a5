"""inference.embed_sparse through a real worker serving SPLADE-tiny (catalogue kind "sparse") on its own
queue, real Redis, the Python and Ruby clients: values equal sentence-transformers' SparseEncoder.encode,
micro-batched, pruned as asked, every bad argument named, and each model kind refusing the other's task."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from inference_tasks import client, producer
from inference_tasks.routing import EMBED_SPARSE_TASK, EMBED_TASK, RERANK_TASK, WORKER_INFO_TASK
from tests.support.localstack import REPO_ROOT, producer_app
from tests.support.ruby_runner import ruby
from tests.support.sparse_model import SPLADE_TINY, reference_encoder, reference_rows

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 90
TICKETS = [json.loads(line)["text"] for line in (REPO_ROOT / "data" / "support_tickets.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def sparse_pool(start_worker, fresh_redis_url, tmp_path_factory):
    models = tmp_path_factory.mktemp("sparse") / "models.toml"
    models.write_text(
        f'[models.splade]\nsource = "{SPLADE_TINY}"\nkind = "sparse"\nprompts = {{ query = "query: " }}\n'
    )
    url = fresh_redis_url()
    worker = start_worker(model="splade", redis_url=url, concurrency=1, models_file=str(models))
    return {"app": producer_app(url), "worker": worker}


def sent(app, texts, **kwargs):
    return producer.send(app, EMBED_SPARSE_TASK, args=[texts], kwargs=kwargs, model="splade")


def refusal(app, task: str, args: list, model: str | None = "splade", **kwargs) -> str:
    result = producer.send(app, task, args=args, kwargs=kwargs, model=model)
    with pytest.raises(Exception) as raised:
        producer.collect(result, RESULT_TIMEOUT_S)
    return str(raised.value)


def assert_rows_equal(embeddings: list[dict], texts: list[str]) -> None:
    for got, expected in zip(embeddings, reference_rows(texts), strict=True):
        assert got["indices"] == expected.indices.tolist()
        np.testing.assert_allclose(got["values"], expected.values, rtol=1e-5, atol=1e-5)


def test_values_equal_sparse_encoder_and_a_burst_shares_one_pass(sparse_pool):
    app = sparse_pool["app"]
    batches = [TICKETS[start : start + 3] for start in range(0, 48, 3)]
    results = [producer.collect(task, RESULT_TIMEOUT_S) for task in [sent(app, texts) for texts in batches]]
    for texts, result in zip(batches, results, strict=True):
        assert result["alias"] == "splade" and result["dim"] == 30522 and result["model"] == "splade-tiny"
        assert str(SPLADE_TINY.parent) not in json.dumps(result)  # no path of this host in a result
        assert_rows_equal(result["embeddings"], texts)
        tokenizer = reference_encoder().tokenizer
        assert result["usage"]["tokens"] == sum(len(ids) for ids in tokenizer(texts)["input_ids"])
    seen = {}
    for _ in range(4):
        info = app.send_task(WORKER_INFO_TASK, queue="inference.splade").get(timeout=RESULT_TIMEOUT_S)
        seen[info["pid"]] = info["microbatch"]["batched_tasks"]
    assert sum(seen.values()) > 0  # several tasks' texts in one forward pass


def test_top_k_min_weight_prompts_and_tokens(sparse_pool):
    app = sparse_pool["app"]
    texts = TICKETS[40:42]
    full = reference_rows(texts)
    top = producer.collect(sent(app, texts, top_k=5, return_tokens=True), RESULT_TIMEOUT_S)["embeddings"]
    for got, row in zip(top, full, strict=True):
        largest = sorted(np.argsort(-row.values, kind="stable")[:5])
        assert got["indices"] == row.indices[largest].tolist()
        assert got["tokens"] == reference_encoder().tokenizer.convert_ids_to_tokens(got["indices"])
    floor = producer.collect(sent(app, texts, min_weight=1.0), RESULT_TIMEOUT_S)["embeddings"]
    for got, row in zip(floor, full, strict=True):
        assert got["indices"] == row.indices[row.values >= 1.0].tolist() and min(got["values"]) >= 1.0
    prompted = producer.collect(sent(app, texts, prompt_name="query"), RESULT_TIMEOUT_S)["embeddings"]
    assert_rows_equal(prompted, ["query: " + text for text in texts])
    as_dict = client.embed_sparse(app, texts, model="splade", top_k=3, form="dict")
    assert all(len(row) == 3 and all(isinstance(index, int) for index in row) for row in as_dict["embeddings"])
    named = client.embed_sparse(app, texts[:1], model="splade", top_k=5, return_tokens=True, form="dict")
    [weights] = named["embeddings"]
    assert list(weights) == top[0]["tokens"]
    np.testing.assert_allclose(list(weights.values()), top[0]["values"], rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"top_k": 0}, "inference.embed_sparse: top_k must be an integer from 1 to 30522, got 0"),
        ({"top_k": "5"}, "top_k must be an integer from 1 to 30522, got '5'"),
        ({"min_weight": -1}, "min_weight must be a number of at least 0, got -1"),
        ({"min_weight": True}, "min_weight must be a number of at least 0, got True"),
        ({"return_tokens": "yes"}, "return_tokens must be true or false, got a string"),
        ({"prompt_name": "passage"}, "prompt_name must be one of the prompts of model 'splade': 'query'"),
        ({"topk": 5}, "unknown argument(s) 'topk'; accepted: texts, top_k, min_weight, return_tokens"),
        ({"truncate": False, "texts": ["word " * 600]}, "(truncate=false)"),
        ({"texts": []}, "texts is empty"),
    ],
)
def test_every_bad_argument_fails_with_its_name(sparse_pool, kwargs, named):
    texts = kwargs.pop("texts", ["a text"])
    assert named in refusal(sparse_pool["app"], EMBED_SPARSE_TASK, [texts], **kwargs)


def test_each_kind_refuses_the_other_kinds_tasks(sparse_pool, inference_worker):
    app = sparse_pool["app"]
    for task, args in ((EMBED_TASK, [["a text"]]), (RERANK_TASK, ["q", ["a text"]])):
        message = refusal(app, task, args)
        assert f"{task}: model 'splade' is a sparse encoder; it serves inference.embed_sparse only" in message
    dense = refusal(producer_app(inference_worker.redis_url), EMBED_SPARSE_TASK, [["a text"]], model=None)
    assert re.search(r"model 'minilm' is a dense embedding model; .* catalogue entry of kind 'sparse'", dense)


@pytest.mark.external
def test_the_ruby_client_gets_the_same_sparse_vectors(sparse_pool):
    texts = TICKETS[50:53]
    report = ruby("sparse_embed.rb", sparse_pool["worker"].redis_url, TEXTS=json.dumps(texts))
    assert report["alias"] == "splade" and report["dim"] == 30522
    assert_rows_equal(report["embeddings"], texts)
    assert [len(row["indices"]) for row in report["top"]] == [4, 4, 4]
    assert all(row["tokens"] for row in report["top"])

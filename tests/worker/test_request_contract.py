"""The request contract of search and RAG callers, through real workers, real Redis and the real model:
rerank (bi-encoder and a cross-encoder), prompts, Matryoshka dimensions, visible truncation, usage,
quantized encodings and long documents in chunks. Expected values come from sentence-transformers
itself, run here on the same weights."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings

from inference_tasks import producer
from inference_tasks.codec import decode_embeddings
from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_CHUNKS_TASK,
    EMBED_TASK,
    RERANK_TASK,
    TRAIN_CLASSIFIER_TASK,
    WORKER_INFO_TASK,
)
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from tests.support.localstack import REPO_ROOT, producer_app
from tests.support.ruby_runner import ruby
from tests.support.wire import encode, task_message

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 90
TICKETS = [json.loads(line) for line in (REPO_ROOT / "data" / "support_tickets.jsonl").read_text().splitlines()]
QUERY = "I was charged twice for my subscription this month."
# 3,000 words: far over the model's 256 word pieces.
LONG_TEXT = " ".join(ticket["text"] for ticket in TICKETS[:300])
LONG_TEXT = " ".join(LONG_TEXT.split()[:3000])


def run(app, task: str, *args, **kwargs):
    return producer.collect(producer.send(app, task, args=list(args), kwargs=kwargs), RESULT_TIMEOUT_S)


def failure(app, task: str, *args, **kwargs) -> str:
    """The message of a task expected to fail."""
    sent = producer.send(app, task, args=list(args), kwargs=kwargs)
    with pytest.raises(Exception) as raised:
        producer.collect(sent, RESULT_TIMEOUT_S)
    return str(raised.value)


@pytest.fixture(scope="module")
def local_model():
    """sentence-transformers on the same weights, in this process (nothing here forks after it)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model_path(DEFAULT_MODEL)), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def app(inference_worker):
    return producer_app(inference_worker.redis_url)


def candidates() -> list[str]:
    """Twelve tickets: four about billing, eight about other things."""
    billing = [t["text"] for t in TICKETS if t["label"] == "billing"][:4]
    others = [t["text"] for t in TICKETS if t["label"] not in ("billing",)][:8]
    mixed = others[:3] + billing[:2] + others[3:6] + billing[2:] + others[6:]
    return mixed


def billing_indexes(documents: list[str]) -> set[int]:
    billing = {t["text"] for t in TICKETS if t["label"] == "billing"}
    return {index for index, text in enumerate(documents) if text in billing}


def test_rerank_with_the_default_model_is_bi_encoder_cosine_best_first(app, local_model):
    documents = candidates()
    result = run(app, RERANK_TASK, QUERY, documents)
    assert result["method"] == "bi-encoder" and result["alias"] == "minilm" and result["model"] == DEFAULT_MODEL
    vectors = local_model.encode([QUERY, *documents], normalize_embeddings=True)
    expected = vectors[1:] @ vectors[0]
    indexes = [item["index"] for item in result["results"]]
    assert indexes == sorted(range(len(documents)), key=lambda i: -expected[i])
    np.testing.assert_allclose([item["score"] for item in result["results"]], expected[indexes], atol=1e-5)
    # Cohere's and Jina's field name, for clients written against their rerank APIs.
    assert all(item["relevance_score"] == item["score"] for item in result["results"])
    billing = {
        i for i, text in enumerate(documents) if any(t["text"] == text and t["label"] == "billing" for t in TICKETS)
    }
    assert set(indexes[:3]) <= billing
    assert "document" not in result["results"][0]
    assert result["usage"]["tokens"] == sum(len(ids) for ids in local_model.tokenizer([QUERY, *documents])["input_ids"])

    top = run(app, RERANK_TASK, QUERY, documents, top_n=2, return_documents=True)
    assert [item["index"] for item in top["results"]] == indexes[:2]
    assert [item["document"] for item in top["results"]] == [documents[i] for i in indexes[:2]]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"top_n": 0}, "top_n must be an integer from 1"),
        ({"top_n": "3"}, "top_n must be an integer from 1"),
        ({"return_documents": "yes"}, "return_documents must be true or false"),
        ({"documents": []}, "documents is empty"),
        ({"documents": ["ok", 3]}, "documents[1] must be a string"),
        ({"query": "  "}, "query is empty or blank"),
        ({"truncate": None}, "truncate must be true or false"),
    ],
)
def test_rerank_refuses_bad_arguments_naming_them(app, kwargs, named):
    arguments = {"query": QUERY, "documents": ["a text", "another"], **kwargs}
    assert named in failure(app, RERANK_TASK, **arguments)


def test_an_error_quotes_a_long_value_short(app):
    """A 100,000-character value is quoted by its first characters and its length, so the error (in the
    result, the reply job and the logs) stays small."""
    message = failure(app, EMBED_TASK, ["a text"], model="m" * 100_000)
    assert "unknown model 'mmmm" in message and "... (100000 characters)" in message
    assert len(message) < 1_000, len(message)


@pytest.mark.parametrize(
    ("task", "args", "said"),
    [
        (WORKER_INFO_TASK, ["extra"], "inference.worker_info: too many positional arguments; it takes no arguments"),
        (
            EMBED_TASK,
            [["a text"], True, "float", "a fourth"],
            "inference.embed: too many positional arguments; it takes texts, normalize, encoding (by position or "
            "keyword) and model, prompt_name, prompt, dimensions, truncate, cache (by keyword only)",
        ),
        (RERANK_TASK, ["q", ["d"]], None),
    ],
    ids=["worker_info", "embed", "rerank-fine"],
)
def test_positional_arguments_a_task_cannot_take_fail_naming_the_task(app, task, args, said):
    """Celery called the task's function with them and failed with a bare TypeError; the task now fails
    with InvalidInput saying what it takes (the valid call beside them still runs)."""
    sent = app.send_task(task, args=args, queue="inference")
    if said is None:
        assert sent.get(timeout=RESULT_TIMEOUT_S)["results"]
        return
    with pytest.raises(Exception) as raised:
        sent.get(timeout=RESULT_TIMEOUT_S)
    assert type(raised.value).__name__ == "InvalidInput" and said in str(raised.value), repr(raised.value)


def test_a_training_task_sent_to_an_inference_queue_is_refused_naming_the_training_queue(app):
    """An inference worker does not train (its children have one thread each and serve requests): a
    training task taken from the inference queue fails, saying where it belongs."""
    sent = app.send_task(
        TRAIN_CLASSIFIER_TASK, kwargs={"name": "x", "texts": ["a"], "labels": ["b"]}, queue="inference"
    )
    with pytest.raises(Exception) as raised:
        sent.get(timeout=RESULT_TIMEOUT_S)
    assert "inference.train_classifier: runs on the training queues ('training'" in str(raised.value)
    assert "not on the inference queue 'inference'" in str(raised.value)


def test_small_reranks_share_a_forward_pass_and_keep_their_own_scores(app, local_model):
    """A burst of one-query reranks is micro-batched (query and documents of several tasks in one
    encode) and every task still gets exactly its own cosines.

    Both children are kept busy first (a long embed each), so the burst waits for them whatever the
    pace of the sends: sent to idle children, a burst on a slow host could run one task at a time
    (this failed one CI run in about ten)."""
    documents = candidates()[:6]
    queries = [t["text"] for t in TICKETS[10:22]]
    before = batched_tasks(app, "inference")
    long_texts = [" ".join(t["text"] for t in TICKETS[i : i + 12]) for i in range(32)]
    busy = [producer.send(app, EMBED_TASK, args=[long_texts]) for _ in range(2)]
    sent = [producer.send(app, RERANK_TASK, args=[query, documents]) for query in queries]
    results = [producer.collect(result, RESULT_TIMEOUT_S) for result in sent]
    for result in busy:
        producer.collect(result, RESULT_TIMEOUT_S)
    vectors = local_model.encode(documents, normalize_embeddings=True)
    for query, result in zip(queries, results, strict=True):
        expected = vectors @ local_model.encode(query, normalize_embeddings=True)
        got = {item["index"]: item["score"] for item in result["results"]}
        np.testing.assert_allclose([got[i] for i in range(len(documents))], expected, atol=1e-5)
    assert batched_tasks(app, "inference") > before


def batched_tasks(app, queue: str, children: int = 2) -> int:
    """Tasks run inside micro-batches so far, summed over the worker's `children`. Each worker_info call is
    answered by one child, and a call sent after the last one's answer goes to whichever child is idle
    first, often the same one: 20 such calls were all answered by one child in two CI runs (the burst,
    batched in the other, read as no batching). So they go in bursts, one call per child and one more,
    until every child has answered (bounded)."""
    seen: dict[int, int] = {}
    for _ in range(20):
        sent = [app.send_task(WORKER_INFO_TASK, queue=queue) for _ in range(children + 1)]
        for result in sent:
            info = result.get(timeout=RESULT_TIMEOUT_S)
            seen[info["pid"]] = info["microbatch"]["batched_tasks"]
        if len(seen) == children:
            return sum(seen.values())
    raise AssertionError(f"worker_info on {queue!r} answered by {len(seen)} of {children} children in 20 bursts")


def test_a_literal_prompt_gives_sentence_transformers_vectors(app, local_model):
    texts = ["how do I reset my password", "refund for a double charge"]
    result = run(app, EMBED_TASK, texts, prompt="query: ")
    expected = local_model.encode(texts, prompt="query: ", normalize_embeddings=True)
    np.testing.assert_allclose(result["embeddings"], expected, atol=1e-5)
    plain = local_model.encode(texts, normalize_embeddings=True)
    assert not np.allclose(result["embeddings"], plain, atol=1e-3)
    message = failure(app, EMBED_TASK, texts, prompt_name="query")
    assert "prompt_name must be one of the prompts of model 'minilm': none" in message
    assert "prompt must be a string" in failure(app, EMBED_TASK, texts, prompt=7)


def test_dimensions_equal_truncate_dim_and_stay_unit_length(app, local_model):
    texts = ["The parcel never arrived.", "Dark mode hides the save button."]
    result = run(app, EMBED_TASK, texts, dimensions=128)
    assert result["dim"] == 128
    vectors = np.array(result["embeddings"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = local_model.encode(texts, truncate_dim=128, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    raw = run(app, EMBED_TASK, texts, normalize=False, dimensions=64)
    np.testing.assert_allclose(raw["embeddings"], local_model.encode(texts)[:, :64], atol=1e-5)
    for bad in (0, 385, 1.5, "64"):
        assert "dimensions must be null or a whole number from 1 to the model's 384" in failure(
            app, EMBED_TASK, texts, dimensions=bad
        )


def test_truncation_is_visible_and_can_be_refused(app, local_model):
    short = "My invoice is wrong."
    counts = [len(ids) for ids in local_model.tokenizer([short, LONG_TEXT], verbose=False)["input_ids"]]
    assert counts[1] > 3000
    result = run(app, EMBED_TASK, [short, LONG_TEXT])
    usage = result["usage"]
    assert usage["truncated"] == [1]
    assert usage["tokens"] == counts[0] + 256
    assert usage["inference_ms"] > 0
    assert isinstance(usage["queue_ms"], float) and usage["queue_ms"] >= 0
    np.testing.assert_allclose(result["embeddings"][1], local_model.encode(LONG_TEXT), atol=1e-5)
    message = failure(app, EMBED_TASK, [short, LONG_TEXT], truncate=False)
    assert f"texts[1] is {counts[1]} tokens, more than the model's limit of 256 (truncate=false)" in message
    fits = run(app, EMBED_TASK, [short], truncate=False)
    assert fits["usage"] == fits["usage"] | {"tokens": counts[0], "truncated": []}


def test_classify_reports_usage_per_text(app, local_model):
    rows = run(app, CLASSIFY_TASK, ["I was charged twice", LONG_TEXT], ["billing", "shipping"])
    counts = [len(ids) for ids in local_model.tokenizer(["I was charged twice"])["input_ids"]]
    assert rows[0]["usage"]["tokens"] == counts[0] and rows[0]["usage"]["truncated"] is False
    assert rows[1]["usage"]["tokens"] == 256 and rows[1]["usage"]["truncated"] is True


def test_a_raw_producer_without_a_send_stamp_gets_no_queue_time(app, inference_worker):
    from celery.result import AsyncResult

    from inference_tasks.redis_access.connections import redis_for

    message = task_message(EMBED_TASK, [["a raw producer's text"]])
    redis_for(inference_worker.redis_url).lpush("inference", encode(message))
    result = AsyncResult(message["headers"]["id"], app=app).get(timeout=RESULT_TIMEOUT_S)
    assert result["usage"]["queue_ms"] is None and result["usage"]["tokens"] > 0


@pytest.mark.parametrize(("encoding", "width", "dtype"), [
    ("int8", 384, np.int8), ("uint8", 384, np.uint8), ("binary", 48, np.int8), ("ubinary", 48, np.uint8),
])  # fmt: skip
def test_quantized_encodings_decode_to_sentence_transformers_values(app, encoding, width, dtype):
    texts = [t["text"] for t in TICKETS[:5]]
    floats = np.array(run(app, EMBED_TASK, texts)["embeddings"], dtype=np.float32)
    result = run(app, EMBED_TASK, texts, encoding=encoding)
    assert (result["encoding"], result["dim"], result["count"]) == (encoding, 384, 5)
    decoded = decode_embeddings(result)
    assert decoded.shape == (5, width) and decoded.dtype == dtype
    if encoding.endswith("binary"):
        np.testing.assert_array_equal(decoded, quantize_embeddings(floats, encoding))
    else:
        # Buckets of the model's calibration corpus, not of this batch: close to ST's own result
        # calibrated on the same corpus vectors, never the batch's (which would put every text's
        # value for a dimension at the two ends of the scale with five texts).
        assert int(np.abs(decoded.astype(int)).max()) > 0
        batch_calibrated = quantize_embeddings(floats, encoding, calibration_embeddings=floats)
        assert not np.array_equal(decoded, batch_calibrated)


def test_a_texts_int8_bytes_do_not_depend_on_its_batch_mates(app):
    text = "The verification link has expired."
    alone = decode_embeddings(run(app, EMBED_TASK, [text], encoding="int8"))[0].astype(int)
    mates = [LONG_TEXT[:2000], "ok", "Ich möchte mein Abonnement kündigen.", text, "404"]
    in_batch = decode_embeddings(run(app, EMBED_TASK, mates, encoding="int8"))[3].astype(int)
    # The float vectors of a text alone and in a padded batch differ by ~1e-7 (padding changes the
    # summation order), which can move a value sitting on a bucket edge to the next bucket; nothing more.
    assert np.abs(alone - in_batch).max() <= 1
    assert (alone != in_batch).sum() <= 3


def test_chunks_cover_a_long_text_in_order_with_the_overlap_asked_for(app, local_model):
    result = run(app, EMBED_CHUNKS_TASK, [LONG_TEXT, "A short one."], chunk_tokens=128, overlap_tokens=32)
    chunks, short = result["chunks"]
    assert [(c["start"], c["end"]) for c in short] == [(0, len("A short one."))]
    tokenizer = local_model.tokenizer
    offsets = [o for o in tokenizer(LONG_TEXT, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    starts = {start: index for index, (start, _) in enumerate(offsets)}
    ends = {end: index for index, (_, end) in enumerate(offsets)}
    assert chunks[0]["start"] == 0 and chunks[-1]["end"] == len(LONG_TEXT)
    for before, after in itertools.pairwise(chunks):
        first, last = starts[after["start"]], ends[before["end"]]
        assert last - first + 1 == 32  # the last 32 pieces of one are the first 32 of the next
        assert starts[before["start"]] < first
    for chunk in chunks[:-1]:
        assert ends[chunk["end"]] - starts[chunk["start"]] + 1 == 126  # 128 with [CLS] and [SEP]
    pieces = sum(len(tokenizer(LONG_TEXT[c["start"] : c["end"]])["input_ids"]) for c in chunks)
    assert result["usage"]["tokens"] == pieces + len(tokenizer(["A short one."])["input_ids"][0])
    picked = [chunks[0], chunks[len(chunks) // 2]]
    expected = local_model.encode([LONG_TEXT[c["start"] : c["end"]] for c in picked], normalize_embeddings=True)
    np.testing.assert_allclose([c["embedding"] for c in picked], expected, atol=1e-5)

    packed = run(app, EMBED_CHUNKS_TASK, ["A short one.", "Another."], encoding="int8", dimensions=64)
    assert packed["dim"] == 64 and packed["encoding"] == "int8"
    one = packed["chunks"][1][0]
    assert decode_embeddings({"encoding": "int8", "dim": 64, "embeddings": one["embedding"]}).shape == (1, 64)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"chunk_tokens": 0}, "chunk_tokens must be an integer from 1 to 256"),
        ({"chunk_tokens": 300}, "chunk_tokens must be an integer from 1 to 256"),
        ({"chunk_tokens": 2}, "chunk_tokens 2 leaves no room for text"),
        ({"chunk_tokens": 64, "overlap_tokens": 62}, "overlap_tokens must be an integer from 0 to 61"),
        ({"overlap_tokens": -1}, "overlap_tokens must be an integer from 0"),
        ({"texts": ["x" * 200_001]}, "INFERENCE_MAX_DOCUMENT_CHARS"),
    ],
)
def test_embed_chunks_refuses_bad_arguments_naming_them(app, kwargs, named):
    assert named in failure(app, EMBED_CHUNKS_TASK, **{"texts": ["some text"], **kwargs})


# ---- A catalogue with prompts and a cross-encoder, each served by its own pool.


@dataclass
class Fit:
    """The test cross-encoder being fitted (~25 s) in a process of its own, into `target`."""

    target: Path
    process: subprocess.Popen[bytes]
    log: Path

    def done(self) -> Path:
        if self.process.wait(timeout=300) != 0:
            raise RuntimeError(f"fitting the test cross-encoder failed:\n{self.log.read_text()[-4000:]}")
        return self.target


@pytest.fixture(scope="module", autouse=True)
def cross_encoder_fit(tmp_path_factory) -> Iterator[Fit]:
    """Started with the module's first test, so that it fits while the others run (its one test is the
    module's last). Its directory exists from the start: the catalogue names it, and a catalogue source
    must be a directory."""
    root = tmp_path_factory.mktemp("models")
    target, log = root / "ticket-cross-encoder", root / "fit.log"
    target.mkdir()
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "tests.support.cross_encoder", str(target)], cwd=REPO_ROOT,
                                   stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    yield Fit(target, process, log)
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def cross_encoder_dir(cross_encoder_fit) -> Path:
    return cross_encoder_fit.done()


@pytest.fixture(scope="module")
def catalogue(fresh_redis_url, tmp_path_factory, cross_encoder_fit) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("catalogue")
    models = root / "models.toml"
    models.write_text(
        "[models.prompted]\n"
        f'source = "{resolve_model_path(DEFAULT_MODEL)}"\n'
        'prompts = { query = "query: ", passage = "passage: " }\n'
        'default_prompt = "passage"\n'
        "[models.reranker]\n"
        f'source = "{cross_encoder_fit.target}"\n'
        'kind = "cross-encoder"\n'
    )
    url = fresh_redis_url()
    return {"app": producer_app(url), "settings": {"redis_url": url, "concurrency": 1, "models_file": str(models)}}


@pytest.fixture(scope="module")
def prompted_pool(start_worker, catalogue):
    start_worker(model="prompted", **catalogue["settings"])
    return catalogue["app"]


@pytest.fixture(scope="module")
def reranker_pool(start_worker, catalogue, cross_encoder_dir):
    start_worker(model="reranker", **catalogue["settings"])
    return catalogue["app"]


def test_named_and_default_prompts_of_a_catalogue_model(prompted_pool, local_model):
    app = prompted_pool
    texts = ["how do I reset my password"]
    default = producer.collect(producer.send(app, EMBED_TASK, args=[texts], model="prompted"), RESULT_TIMEOUT_S)
    np.testing.assert_allclose(default["embeddings"], local_model.encode(texts, prompt="passage: "), atol=1e-5)
    named = producer.send(app, EMBED_TASK, args=[texts], kwargs={"prompt_name": "query"}, model="prompted")
    np.testing.assert_allclose(
        producer.collect(named, RESULT_TIMEOUT_S)["embeddings"], local_model.encode(texts, prompt="query: "), atol=1e-5
    )
    unknown = producer.send(app, EMBED_TASK, args=[texts], kwargs={"prompt_name": "search"}, model="prompted")
    with pytest.raises(
        Exception, match="prompt_name must be one of the prompts of model 'prompted': 'passage', 'query'"
    ):
        producer.collect(unknown, RESULT_TIMEOUT_S)
    # rerank on an embedding model with prompts: query: for the query, passage: for each document
    documents = candidates()
    ranked = producer.collect(producer.send(app, RERANK_TASK, args=[QUERY, documents], model="prompted"), 60)
    vectors = local_model.encode(["query: " + QUERY, *("passage: " + d for d in documents)])
    expected = vectors[1:] @ vectors[0]
    np.testing.assert_allclose([item["score"] for item in ranked["results"]], sorted(expected, reverse=True), atol=1e-5)


@pytest.mark.external
def test_the_ruby_client_decodes_every_encoding_reranks_and_chunks(app, inference_worker, local_model):
    texts = [t["text"] for t in TICKETS[:4]]
    long_text = " ".join(LONG_TEXT.split()[:300])
    report = ruby(
        "request_contract.rb", inference_worker.redis_url, TEXTS=json.dumps(texts), QUERY=QUERY, LONG_TEXT=long_text
    )
    floats = np.array(report["encodings"]["json"]["embeddings"], dtype=np.float32)
    np.testing.assert_allclose(report["encodings"]["f32-base64"]["embeddings"], floats, atol=1e-6)
    python_side = {
        encoding: decode_embeddings(run(app, EMBED_TASK, texts, encoding=encoding))
        for encoding in ("int8", "uint8", "binary", "ubinary")
    }
    for encoding, expected in python_side.items():
        assert report["encodings"][encoding]["dim"] == 384
        np.testing.assert_array_equal(np.array(report["encodings"][encoding]["embeddings"]), expected)
    np.testing.assert_array_equal(python_side["binary"], quantize_embeddings(floats, "binary"))
    ranked = run(app, RERANK_TASK, QUERY, texts, top_n=2, return_documents=True)
    from_ruby = report["rerank"]["results"]
    assert [(r["index"], r["document"]) for r in from_ruby] == [(r["index"], r["document"]) for r in ranked["results"]]
    np.testing.assert_allclose([r["score"] for r in from_ruby], [r["score"] for r in ranked["results"]], atol=1e-6)
    assert [r["relevance_score"] for r in from_ruby] == [r["score"] for r in from_ruby]
    assert report["rerank"]["method"] == "bi-encoder"
    expected = local_model.encode(texts, prompt="query: ", truncate_dim=32, normalize_embeddings=True)
    np.testing.assert_allclose(report["dimensions"], expected, atol=1e-5)
    [chunks] = report["chunks"]
    assert len(chunks) > 1 and chunks[0]["start"] == 0 and chunks[-1]["end"] == len(long_text)
    assert all(len(chunk["embedding"]) == 384 and min(chunk["embedding"]) >= -128 for chunk in chunks)


def test_the_python_example_indexes_searches_and_reranks(inference_worker):
    import os

    from tests.support.localstack import clean_env

    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "search_and_rerank.py")],
        env=clean_env(os.environ, REDIS_URL=inference_worker.redis_url),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("tokens") and "int8 index" in lines[1]
    assert "reranked (bi-encoder" in lines[2]
    assert "charged twice" in lines[3]  # the refunds passage answers the query


def test_rerank_with_a_cross_encoder_scores_pairs_like_sentence_transformers(reranker_pool, cross_encoder_dir):
    from sentence_transformers import CrossEncoder

    app = reranker_pool
    documents = candidates()
    result = producer.collect(
        producer.send(app, RERANK_TASK, args=[QUERY, documents], kwargs={"top_n": 5}, model="reranker"), 60
    )
    assert result["method"] == "cross-encoder" and result["alias"] == "reranker"
    local = CrossEncoder(str(cross_encoder_dir), device="cpu", local_files_only=True)
    expected = local.predict([(QUERY, document) for document in documents])
    order = sorted(range(len(documents)), key=lambda i: -expected[i])[:5]
    assert [item["index"] for item in result["results"]] == order
    np.testing.assert_allclose([item["score"] for item in result["results"]], expected[order], atol=1e-5)
    billing = {
        i for i, text in enumerate(documents) if any(t["text"] == text and t["label"] == "billing" for t in TICKETS)
    }
    assert {item["index"] for item in result["results"][:3]} <= billing
    pairs = local.tokenizer([QUERY] * len(documents), documents)["input_ids"]
    assert result["usage"]["tokens"] == sum(len(ids) for ids in pairs)
    queries = [t["text"] for t in TICKETS[30:38]]
    burst = [producer.send(app, RERANK_TASK, args=[q, documents[:5]], model="reranker") for q in queries]
    for query, sent in zip(queries, burst, strict=True):
        got = {item["index"]: item["score"] for item in producer.collect(sent, RESULT_TIMEOUT_S)["results"]}
        expected = local.predict([(query, document) for document in documents[:5]])
        np.testing.assert_allclose([got[i] for i in range(5)], expected, atol=1e-5)
    assert batched_tasks(app, "inference.reranker", children=1) > 0  # pairs of several queries in one pass
    refused = producer.send(app, EMBED_TASK, args=[["a text"]], model="reranker")
    with pytest.raises(Exception, match=re.escape("model 'reranker' is a cross-encoder; it serves inference.rerank")):
        producer.collect(refused, RESULT_TIMEOUT_S)

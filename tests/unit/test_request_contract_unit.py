"""The request contract's pieces on their own: prompts, dimensions, quantization, chunk windows, usage."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings

from benchmarks.harness.passes import fixed_size_passes, padded_tokens
from inference_tasks.codec import decode_embeddings
from inference_tasks.config.catalogue import ModelEntry
from inference_tasks.contract.options import check_dimensions, document_prompt, query_prompt, resolve_prompt
from inference_tasks.redis_access.sent_at import stamp_sent_at
from inference_tasks.routing import EMBED_TASK, SENT_AT_HEADER, WORKER_INFO_TASK
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.runtimes.passes import forward_passes
from inference_tasks.worker.tasks.chunking import spans, windows
from inference_tasks.worker.tasks.usage import TaskClock, TokenCount, count_tokens
from inference_tasks.worker.tasks.vectors import encoded, quantize, shaped

E5 = ModelEntry("e5", prompts={"query": "query: ", "passage": "passage: "}, default_prompt="passage")
PLAIN = ModelEntry("minilm")


def test_prompts_resolve_literal_named_default_or_none():
    assert resolve_prompt(EMBED_TASK, E5, None, None) == "passage: "
    assert resolve_prompt(EMBED_TASK, E5, "query", None) == "query: "
    assert resolve_prompt(EMBED_TASK, E5, None, "Represent this: ") == "Represent this: "
    assert resolve_prompt(EMBED_TASK, PLAIN, None, None) == ""
    assert (query_prompt(E5), document_prompt(E5), query_prompt(PLAIN)) == ("query: ", "passage: ", "")
    with pytest.raises(InvalidInput, match="prompt_name must be one of the prompts of model 'e5': 'passage', 'query'"):
        resolve_prompt(EMBED_TASK, E5, "search", None)
    with pytest.raises(InvalidInput, match="model 'minilm': none"):
        resolve_prompt(EMBED_TASK, PLAIN, "query", None)
    with pytest.raises(InvalidInput, match="give prompt_name or prompt, not both"):
        resolve_prompt(EMBED_TASK, E5, "query", "x")
    with pytest.raises(InvalidInput, match="prompt must be a string"):
        resolve_prompt(EMBED_TASK, E5, None, ["query: "])


def test_dimensions_are_checked_against_the_model():
    assert check_dimensions(EMBED_TASK, None, 384) is None
    assert check_dimensions(EMBED_TASK, 384, 384) == 384
    for bad in (0, 385, True, 2.0, "8"):
        with pytest.raises(InvalidInput, match="dimensions must be null or a whole number from 1 to the model's 384"):
            check_dimensions(EMBED_TASK, bad, 384)


def test_shaped_keeps_the_first_components_and_renormalizes():
    vectors = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
    cut = shaped(vectors.copy(), 4, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(cut, vectors[:, :4] / np.linalg.norm(vectors[:, :4], axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(shaped(vectors, 4, normalize=False), vectors[:, :4])
    assert shaped(vectors, None, True) is vectors


@pytest.mark.parametrize("encoding", ["int8", "uint8", "binary", "ubinary"])
def test_quantize_equals_sentence_transformers(encoding):
    rng = np.random.default_rng(1)
    calibration = rng.normal(size=(200, 40)).astype(np.float32)
    ranges = np.vstack((calibration.min(axis=0), calibration.max(axis=0)))
    vectors = rng.normal(size=(7, 40)).astype(np.float32)
    ours = quantize(vectors, encoding, ranges)
    theirs = quantize_embeddings(vectors, encoding, ranges=ranges)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
    packed = encoded(vectors, encoding, ranges)
    assert (packed["dim"], packed["count"], packed["encoding"]) == (40, 7, encoding)
    np.testing.assert_array_equal(decode_embeddings(packed), theirs)


def test_float_encodings_round_trip():
    vectors = np.random.default_rng(2).normal(size=(2, 5)).astype(np.float32)
    np.testing.assert_array_equal(decode_embeddings(encoded(vectors, "f32-base64")), vectors)
    np.testing.assert_array_equal(decode_embeddings(encoded(vectors, "json")), vectors)


def test_windows_cover_every_piece_with_the_overlap_asked_for():
    assert windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert windows(3, 4, 1) == [(0, 3)]
    assert windows(0, 4, 1) == []
    assert windows(7, 4, 0) == [(0, 4), (4, 7)]
    with pytest.raises(ValueError, match="overlap 4"):
        windows(10, 4, 4)
    pieces = [(0, 3), (4, 7), (8, 9), (10, 14)]
    assert spans(pieces, 3, 1) == [(0, 9), (8, 14)]


def test_token_counts_truncate_or_refuse():
    assert count_tokens(EMBED_TASK, [10, 300, 20], 256, True) == TokenCount(10 + 256 + 20, [1])
    assert count_tokens(EMBED_TASK, [10, 300], None, False) == TokenCount(310, [])
    with pytest.raises(InvalidInput, match=r"texts\[1\] is 300 tokens, more than the model's limit of 256"):
        count_tokens(EMBED_TASK, [10, 300, 400], 256, False)


def test_queue_time_comes_from_the_send_stamp_only():
    assert TaskClock.start(SimpleNamespace(get=lambda key: None)).sent_at is None
    assert TaskClock.start(SimpleNamespace(get=lambda key: True)).sent_at is None
    assert TaskClock.start(SimpleNamespace(get=lambda key: "1700000000")).sent_at is None
    clock = TaskClock.start(SimpleNamespace(get=lambda key: time.time() - 2.0))
    assert 1990 <= clock.usage(TokenCount(3), None)["queue_ms"] <= 5000
    future = TaskClock.start(SimpleNamespace(get=lambda key: time.time() + 60))
    assert future.usage(TokenCount(3), None)["queue_ms"] == 0


def test_producers_stamp_inference_tasks_with_their_send_time():
    headers: dict = {}
    stamp_sent_at(sender=EMBED_TASK, headers=headers)
    assert abs(headers[SENT_AT_HEADER] - time.time()) < 5
    kept = {SENT_AT_HEADER: 1.5}
    stamp_sent_at(sender=EMBED_TASK, headers=kept)
    assert kept[SENT_AT_HEADER] == 1.5
    other: dict = {}
    stamp_sent_at(sender=WORKER_INFO_TASK, headers=other)
    stamp_sent_at(sender="myapp.tasks.send_mail", headers=other)
    assert other == {}


def test_passes_are_longest_first_and_bounded_by_texts_and_padded_tokens():
    counts = [10, 250, 12, 9, 240, 11]
    # Texts only: one pass of everything (each padded to 250 tokens).
    assert forward_passes(counts, 32, None) == [[1, 4, 2, 5, 0, 3]]
    # 600 padded tokens: the two long texts (2 x 250) together, the one-liners (4 x 12) apart.
    assert forward_passes(counts, 32, 600) == [[1, 4], [2, 5, 0, 3]]
    assert padded_tokens(counts, [[1, 4], [2, 5, 0, 3]]) == 2 * 250 + 4 * 12
    assert forward_passes(counts, 2, None) == [[1, 4], [2, 5], [0, 3]]
    # A text longer than the bound goes alone, and nothing is dropped.
    assert forward_passes([300, 5, 5], 32, 100) == [[0], [1, 2]]
    assert sorted(i for group in forward_passes(counts, 3, 50) for i in group) == list(range(6))
    assert fixed_size_passes([5, 50, 7], 2) == [[1, 2], [0]]

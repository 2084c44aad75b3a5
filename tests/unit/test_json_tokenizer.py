"""The OpenVINO runtime's tokenizer (tokenizer.json through the `tokenizers` library, no transformers and
no torch) answers every call the runtime and worker/runtimes/tokens.py make exactly as transformers' AutoTokenizer
does, on the packaged MiniLM and SPLADE-tiny."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from inference_tasks.config.defaults import DEFAULT_MODEL
from inference_tasks.worker.runtimes import tokens
from inference_tasks.worker.runtimes.json_tokenizer import JsonTokenizer
from inference_tasks.worker.runtimes.model_files import resolve_model_path
from tests.support.sparse_model import SPLADE_TINY

TEXTS = [
    "Hello world",
    "  Leading and trailing spaces  ",
    "Ünïcödé àccents, ÉMOJI 🚀 and 中文字符 mixed in",
    "refund for order #48213 (charged twice!!)",
    "word " * 400,  # over every limit
    "a",
]


@pytest.fixture(scope="module", params=["minilm", "splade-tiny"])
def both(request):
    path = resolve_model_path(DEFAULT_MODEL) if request.param == "minilm" else SPLADE_TINY
    return JsonTokenizer(path), AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def test_batches_are_padded_and_truncated_as_transformers_does(both):
    ours, theirs = both
    for max_length in (8, 128, 512):
        got = ours(TEXTS, padding=True, truncation="longest_first", max_length=max_length, return_tensors="np")
        expected = theirs(TEXTS, padding=True, truncation="longest_first", max_length=max_length, return_tensors="np")
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            np.testing.assert_array_equal(got[name], expected[name])
    assert ours.model_max_length == theirs.model_max_length


def test_counts_special_tokens_prefixes_and_spans_match(both):
    ours, theirs = both
    assert tokens.token_counts(ours, TEXTS) == tokens.token_counts(theirs, TEXTS)
    assert tokens.special_tokens(ours) == tokens.special_tokens(theirs) == 2
    assert tokens.prefix_tokens(ours, "query: ") == tokens.prefix_tokens(theirs, "query: ")
    for text in TEXTS:
        assert tokens.token_spans(ours, text) == tokens.token_spans(theirs, text)

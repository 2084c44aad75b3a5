"""The result codec: orjson speed, plain JSON text, and kombu's type markers when orjson cannot write a value."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np

from inference_tasks.codec import dumps, loads


def test_results_are_plain_json_any_parser_reads():
    """What lands in Redis is ordinary JSON text (Ruby's JSON.parse, Python's json)."""
    result = {"model": "m", "dim": 2, "embeddings": [[0.125, -1.5], [3.0, 1e-07]], "none": None}
    text = dumps(result)
    assert json.loads(text) == result
    assert loads(text) == result
    assert loads(text.decode()) == result


def test_numpy_values_are_written_as_numbers():
    vectors = np.array([[0.25, -0.5]], dtype=np.float32)
    assert json.loads(dumps({"v": vectors, "n": np.float32(0.25)})) == {"v": [[0.25, -0.5]], "n": 0.25}


def test_values_orjson_cannot_write_fall_back_to_kombu_and_come_back():
    """Decimal is not JSON for orjson: kombu's json writes it with a type marker, loads() restores it."""
    value = {"amount": Decimal("1.50"), "big": 2**70}
    assert loads(dumps(value)) == value

"""Argument checks, in process: limits come from Settings, messages say what to fix."""

from __future__ import annotations

import pytest

from inference_tasks.config import Settings
from inference_tasks.validation import InvalidInput, check_flag, check_labels, check_texts

SMALL = Settings(max_batch_texts=3, max_text_chars=10, max_labels=3, max_label_chars=5)


def test_valid_texts_and_labels_pass_through_unchanged():
    """Good input is returned as given (no silent trimming or reordering)."""
    assert check_texts("t", [" a ", "b"], SMALL) == [" a ", "b"]
    assert check_labels("t", ["x", "y", "z"], SMALL) == ["x", "y", "z"]
    assert check_flag("t", "normalize", False) is False


def test_limits_come_from_settings():
    """The batch, text and label limits are the configured ones, and the message names them."""
    with pytest.raises(InvalidInput, match="4 texts is more than the limit of 3"):
        check_texts("t", ["a"] * 4, SMALL)
    with pytest.raises(InvalidInput, match="texts\\[0\\] has 11 characters, more than the limit of 10"):
        check_texts("t", ["a" * 11], SMALL)
    with pytest.raises(InvalidInput, match="4 labels is more than the limit of 3"):
        check_labels("t", ["a", "b", "c", "d"], SMALL)
    with pytest.raises(InvalidInput, match="labels\\[1\\] has 6 characters"):
        check_labels("t", ["a", "bbbbbb"], SMALL)


def test_labels_that_differ_only_by_surrounding_space_are_duplicates():
    """'spam' and ' spam ' would embed alike; they are reported as duplicates."""
    with pytest.raises(InvalidInput, match="duplicates labels\\[0\\]"):
        check_labels("t", ["spam", " spam "], Settings())


def test_booleans_must_be_json_booleans():
    """1 and "true" are refused: producers in other languages must send true/false."""
    for value in (1, "true", None):
        with pytest.raises(InvalidInput, match="must be true or false"):
            check_flag("t", "normalize", value)

"""Counting and locating word pieces with a Hugging Face tokenizer, as the model will read them.

Usage (tokens per request), visible truncation and chunking all need the model's own tokenizer: a
character count says nothing about where the model's limit cuts a text. Every count here includes
the special tokens the model adds ([CLS] and [SEP] for BERT-like models), because those are what a
forward pass computes and what the model's max_seq_length bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def token_counts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Word pieces of each text, special tokens included, before any truncation."""
    encoded = tokenizer(
        [text.strip() for text in texts],  # sentence-transformers strips before tokenizing
        add_special_tokens=True,
        truncation=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    return [len(ids) for ids in encoded["input_ids"]]


def special_tokens(tokenizer: Any) -> int:
    """How many special tokens the tokenizer adds to one text (2 for BERT: [CLS] ... [SEP])."""
    return int(tokenizer.num_special_tokens_to_add(pair=False))


def prefix_tokens(tokenizer: Any, prefix: str) -> int:
    """Word pieces a prompt prefix adds in front of a text (no special tokens)."""
    if not prefix:
        return 0
    return len(tokenizer(prefix.strip(), add_special_tokens=False, verbose=False)["input_ids"])


def token_spans(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    """The character span [start, end) of each word piece of `text` (no special tokens), in order.

    Needs a fast (Rust) tokenizer: only those report offsets.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise NotImplementedError("its tokenizer reports no character offsets (not a fast tokenizer)")
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return [(int(start), int(end)) for start, end in encoded["offset_mapping"] if end > start]

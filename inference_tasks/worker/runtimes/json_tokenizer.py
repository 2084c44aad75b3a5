"""A model's tokenizer.json read with the `tokenizers` library alone, for the OpenVINO runtime.

transformers' AutoTokenizer wraps the same Rust tokenizer, but importing transformers imports torch
(2 s of a cold start that OpenVINO never uses: docs/benchmarks-log.md, "Cold start per runtime"). This
answers the calls the OpenVINO runtime and worker/runtimes/tokens.py make, with the semantics of a fast
tokenizer's: special tokens added by the file's post-processor, truncation that keeps them
(longest_first, at most `max_length` in all), padding to the longest text of the call with the pad
token tokenizer_config.json names. A directory without a tokenizer.json (a slow-only tokenizer) is
read with AutoTokenizer instead (`load_tokenizer`). tests/unit/test_json_tokenizer.py holds it equal to
AutoTokenizer on varied texts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# transformers' model_max_length when tokenizer_config.json gives none (no limit).
UNLIMITED = 1000000000000000019884624838656


class JsonTokenizer:
    """The tokenizer calls the runtime makes, from tokenizer.json and tokenizer_config.json."""

    is_fast = True  # offsets are reported (worker/tokens.token_spans)

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
        # A saved tokenizer.json may carry the truncation and padding of its last use: none by default.
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        config_file = path / TOKENIZER_CONFIG_FILE
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        self.model_max_length = int(config.get("model_max_length") or UNLIMITED)
        pad = config.get("pad_token")
        self._pad_token = pad.get("content") if isinstance(pad, dict) else pad
        self._pad_id = self._tokenizer.token_to_id(self._pad_token) if self._pad_token else None

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        processor = self._tokenizer.post_processor
        return int(processor.num_special_tokens_to_add(pair)) if processor is not None else 0

    def __call__(
        self, texts: str | Sequence[str], add_special_tokens: bool = True, truncation: bool | str = False,
        max_length: int | None = None, padding: bool = False, return_offsets_mapping: bool = False,
        return_tensors: str | None = None, **_: Any,
    ) -> dict[str, Any]:  # fmt: skip
        single = isinstance(texts, str)
        batch = [texts] if isinstance(texts, str) else list(texts)
        tokenizer = self._tokenizer
        try:
            if truncation and max_length:
                tokenizer.enable_truncation(max_length, strategy="longest_first")
            if padding:
                if self._pad_id is None:
                    raise ValueError("this tokenizer has no pad token to pad with")
                tokenizer.enable_padding(pad_id=self._pad_id, pad_token=self._pad_token)
            encodings = tokenizer.encode_batch(batch, add_special_tokens=add_special_tokens)
        finally:
            tokenizer.no_truncation()
            tokenizer.no_padding()
        columns: dict[str, Any] = {
            "input_ids": [encoding.ids for encoding in encodings],
            "token_type_ids": [encoding.type_ids for encoding in encodings],
            "attention_mask": [encoding.attention_mask for encoding in encodings],
        }
        if return_offsets_mapping:
            columns["offset_mapping"] = [encoding.offsets for encoding in encodings]
        if return_tensors == "np":
            import numpy as np

            return {name: np.array(rows, dtype=np.int64) for name, rows in columns.items()}
        return {name: rows[0] for name, rows in columns.items()} if single else columns


def load_tokenizer(path: Path) -> Any:
    """The tokenizer of the model directory `path`: JsonTokenizer where it has a tokenizer.json, else
    transformers' AutoTokenizer (which imports torch)."""
    if (path / TOKENIZER_FILE).is_file():
        return JsonTokenizer(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)

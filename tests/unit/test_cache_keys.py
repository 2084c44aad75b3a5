"""The embedding cache's keys and entries (worker/cache/identity.py, entries.py): every component of a
vector's space changes its key, a row survives the round trip bit for bit, and an entry that is not a
well-formed row is refused, never returned."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from inference_tasks.ops.cache_report import cache_findings
from inference_tasks.redis_access.keys import CACHE_KEY_PREFIX
from inference_tasks.worker.cache import entries
from inference_tasks.worker.cache.identity import VectorSpace, model_digest, runtime_identity
from inference_tasks.worker.runtimes.capabilities import SparseRow
from inference_tasks.worker.runtimes.export_files import MANIFEST_FILE

SPACE = VectorSpace("weights-digest", "openvino", "bf16", "export-digest", 256, "mean", True, "dense")
# One different value per component of the space.
CHANGED = {
    "model": "another-weights-digest",
    "runtime": "ctranslate2",
    "precision": "int8",
    "export": "another-recipe",
    "max_seq_length": 128,
    "pooling": "cls",
    "normalize": False,
    "output": "sparse",
}


def test_changed_covers_every_component_of_the_space():
    assert set(CHANGED) == {item.name for item in dataclasses.fields(VectorSpace)}


@pytest.mark.parametrize("component", sorted(CHANGED))
def test_each_component_of_the_space_changes_the_key(component):
    other = dataclasses.replace(SPACE, **{component: CHANGED[component]})
    assert other.key("my parcel never arrived") != SPACE.key("my parcel never arrived")


def test_the_text_and_its_prompt_change_the_key_and_equal_reads_share_it():
    text = "my parcel never arrived"
    assert SPACE.key(text).startswith(CACHE_KEY_PREFIX)
    assert SPACE.key(text) == SPACE.key(text)
    assert SPACE.key(text + ".") != SPACE.key(text)
    assert SPACE.key("query: " + text) != SPACE.key(text)  # a prompt is part of the text the model reads
    assert SPACE.key("\ud800 lone surrogate") != SPACE.key("? lone surrogate")  # JSON may carry one


def test_a_dense_row_round_trips_bit_for_bit():
    vector = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    back = entries.unpack_dense(entries.pack_dense(vector), 384)
    assert back is not None and back.dtype == np.float32 and back.tobytes() == vector.tobytes()


def corruptions(entry: bytes) -> dict[str, bytes]:
    flipped = bytearray(entry)
    flipped[-3] ^= 0x10
    return {
        "truncated": entry[:-4],
        "a flipped bit": bytes(flipped),
        "another header": b"XX" + entry[2:],
        "garbage": b"not a vector at all",
        "empty": b"",
    }


@pytest.mark.parametrize("damage", ["truncated", "a flipped bit", "another header", "garbage", "empty"])
def test_a_damaged_dense_entry_is_not_a_row(damage):
    entry = entries.pack_dense(np.ones(384, dtype=np.float32))
    assert entries.unpack_dense(corruptions(entry)[damage], 384) is None


def test_a_well_formed_entry_of_another_width_is_not_a_row():
    assert entries.unpack_dense(entries.pack_dense(np.ones(128, dtype=np.float32)), 384) is None
    assert entries.unpack_dense(None, 384) is None


def test_a_sparse_row_round_trips_and_a_damaged_or_foreign_one_is_refused():
    row = SparseRow(np.array([3, 17, 2900], dtype=np.int64), np.array([0.5, 1.25, 0.01], dtype=np.float32))
    entry = entries.pack_sparse(row)
    back = entries.unpack_sparse(entry, 30522)
    assert back is not None
    assert back.indices.tolist() == row.indices.tolist() and back.values.tobytes() == row.values.tobytes()
    assert entries.unpack_sparse(entry, 1000) is None  # an index past this vocabulary
    assert all(entries.unpack_sparse(bad, 30522) is None for bad in corruptions(entry).values())
    assert entries.unpack_sparse(entries.pack_dense(np.ones(4, dtype=np.float32)), 30522) is None


def test_the_model_digest_reads_contents_not_names_or_sizes_and_keeps_a_memo(tmp_path: Path):
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"a" * 64)
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (model / "README.md").write_text("about")
    memo = tmp_path / "memo"
    first = model_digest(model, memo)
    assert model_digest(model, memo) == first and list((memo / "cache-identity").iterdir())
    (model / "README.md").write_text("about this model, longer")
    assert model_digest(model, memo) == first  # a read-me does not change a vector
    (model / "model.safetensors").write_bytes(b"b" * 64)  # same name and size, new weights
    assert model_digest(model, memo) != first
    (model / "model.safetensors").write_bytes(b"a" * 64)
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert model_digest(model, None) != first


class Encoder:
    def __init__(self, path: Path | None, backend: str = "openvino", precision: str = "bf16") -> None:
        self.path, self.backend, self.precision = path, backend, precision


def test_the_export_digest_follows_the_manifest_but_not_when_it_was_written(tmp_path: Path):
    export = tmp_path / "export"
    export.mkdir()

    def manifest(**fields: object) -> tuple[str, str, str]:
        (export / MANIFEST_FILE).write_text(json.dumps(fields))
        return runtime_identity(Encoder(export))

    base = manifest(recipe="r1", exported_at=1.0, seconds=3.0)
    assert manifest(recipe="r1", exported_at=2.0, seconds=9.0) == base
    assert manifest(recipe="r2", exported_at=1.0, seconds=3.0)[2] != base[2]
    assert runtime_identity(Encoder(None, "torch", "f32")) == ("torch", "f32", runtime_identity(Encoder(None))[2])


@pytest.mark.parametrize(
    ("config", "ok"),
    [
        ({"maxmemory-policy": "allkeys-lru", "maxmemory": "1073741824"}, True),
        ({"maxmemory-policy": "noeviction", "maxmemory": "1073741824"}, False),
        ({"maxmemory-policy": "allkeys-lru", "maxmemory": "0"}, False),
    ],
)
def test_doctor_fails_a_cache_redis_that_does_not_evict(config, ok):
    found = cache_findings(True, "", {"redis_version": "7.0", "used_memory": 2**20}, config)
    assert [name for name, *_ in found] == ["cache redis", "cache redis eviction"]
    assert found[1][1] is ok and (found[1][3] == "") is ok


def test_doctor_says_an_unreachable_cache_costs_speed():
    ((name, ok, detail, fix),) = cache_findings(False, "Connection refused", {}, None)
    assert name == "cache redis" and not ok and "compute every text" in detail and "INFERENCE_CACHE_URL" in fix

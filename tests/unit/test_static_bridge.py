"""`distil-model --space teacher`'s map from static vectors into the teacher's space (worker/runtimes/
model2vec/bridge.py) and the command's refusals; the distillation itself runs in tests/worker/test_static.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from inference_tasks.ops.model_commands import distil_model_command
from inference_tasks.worker.runtimes.model2vec.bridge import MIN_FIT_TEXTS, FitTextsError, fit_bridge, fit_texts


class Table:
    """An encoder that answers each text with its row of `vectors` (texts are row numbers)."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str], normalize: bool) -> np.ndarray:
        rows = self.vectors[[int(text) for text in texts]]
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_bridge_recovers_a_linear_map_and_measures_it_on_texts_it_did_not_fit() -> None:
    rng = np.random.default_rng(3)
    static = rng.normal(size=(400, 16))
    truth = rng.normal(size=(16, 24))
    bridge = fit_bridge(Table(static), Table(static @ truth), [str(i) for i in range(400)], "rows")
    assert bridge.matrix.shape == (16, 24) and bridge.texts == 400 and bridge.origin == "rows"
    assert bridge.held_out_cosine >= 0.99  # unit targets: a per-row scale the map cannot take
    mapped = static @ bridge.matrix
    expected = static @ truth
    cosine = (mapped * expected).sum(1) / np.linalg.norm(mapped, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= 0.99
    unrelated = fit_bridge(Table(static), Table(rng.normal(size=(400, 24))), [str(i) for i in range(400)], "noise")
    assert unrelated.held_out_cosine < 0.5  # the figure tells a useless map from a good one


def test_fit_texts_are_the_lines_of_a_file_or_the_packaged_sentences(tmp_path: Path) -> None:
    texts, origin = fit_texts(None)
    assert len(texts) == 1000 and origin == "calibration-corpus sentences"
    sample = tmp_path / "sample.txt"
    sample.write_text("\n".join(f"document {i}" for i in range(MIN_FIT_TEXTS)) + "\n\n  \n")
    assert fit_texts(sample) == ([f"document {i}" for i in range(MIN_FIT_TEXTS)], "sample.txt")
    few = tmp_path / "few.txt"
    few.write_text("one\ntwo\n")
    with pytest.raises(FitTextsError, match=r"--fit-texts: .*few.txt holds 2 texts; the bridge needs at least 100"):
        fit_texts(few)
    with pytest.raises(FitTextsError, match=r"--fit-texts: cannot read .*missing.txt"):
        fit_texts(tmp_path / "missing.txt")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00broken")
    with pytest.raises(FitTextsError, match="give a UTF-8 file, one text per line"):
        fit_texts(binary)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--fit-texts", "{few}"], "--fit-texts fits the map of --space teacher"),
        (["--space", "teacher", "--fit-texts", "{few}"], "holds 2 texts; the bridge needs at least 100"),
        (["--space", "elsewhere"], "Invalid value for '--space': 'elsewhere' is not one of 'static', 'teacher'"),
    ],
)
def test_distil_model_refuses_a_bad_space_or_fit_texts_naming_the_option(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    few = tmp_path / "few.txt"
    few.write_text("one\ntwo\n")
    env = {"INFERENCE_MODEL_CACHE": str(tmp_path / "cache")}
    done = CliRunner().invoke(distil_model_command, ["minilm", *[a.format(few=few) for a in arguments]], env=env)
    assert done.exit_code != 0 and message in done.output, done.output
    assert not (tmp_path / "cache").exists()  # refused before anything was distilled

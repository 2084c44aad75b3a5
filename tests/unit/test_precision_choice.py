"""Which OpenVINO precision a worker serves (worker/runtimes/precision_choice.py), from a record export-model wrote:
the host's CPU read from /proc/cpuinfo, explicit settings winning, a record from another CPU flagged."""

from __future__ import annotations

import pytest

from inference_tasks.ops.precision_report import precision_finding
from inference_tasks.worker.runtimes.precision_choice import choose_precision, has_bf16, host_cpu, write_record

CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx512f avx512_vnni avx512_bf16 amx_bf16 amx_int8 amx_tile
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx512f avx512_vnni avx512_bf16 amx_bf16 amx_int8 amx_tile
"""
AMX = {"model": "Intel(R) Xeon(R) Platinum 8480+", "flags": ["avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                                                              "amx_int8", "amx_tile"]}  # fmt: skip
ROW = {"passed": True, "min_cosine": 0.999, "single_p50_ms": 3.0}


def record(cpu: dict, winner: str = "bf16") -> dict:
    candidates = {
        "f32": {**ROW, "batch_texts_per_s": 500.0},
        "bf16": {**ROW, "batch_texts_per_s": 1105.0},
        "int8": {**ROW, "batch_texts_per_s": 956.0},
    }
    return {"winner": winner, "cpu": cpu, "candidates": candidates}


def test_the_host_cpu_is_its_model_and_the_flags_that_decide_the_precision(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    cpu = host_cpu(tmp_path / "cpuinfo")
    assert cpu == AMX and has_bf16(cpu)
    assert host_cpu(tmp_path / "missing") == {"model": "unknown", "flags": []}


@pytest.mark.parametrize("setting", ["f32", "bf16", "int8"])
def test_an_explicit_precision_wins_over_a_measurement(tmp_path, setting):
    write_record(tmp_path, record(AMX, winner="int8" if setting != "int8" else "f32"))
    assert choose_precision(setting, tmp_path, AMX).as_dict() == {
        "precision": setting, "how": "explicit", "why": f"INFERENCE_OPENVINO_PRECISION={setting}",
    }  # fmt: skip


def test_auto_without_a_measurement_is_openvinos_default(tmp_path):
    choice = choose_precision("auto", tmp_path, AMX)
    assert (choice.precision, choice.how) == ("auto", "default") and "export-model" in choice.why


def test_auto_serves_the_measured_winner_with_its_figures(tmp_path):
    write_record(tmp_path, record(AMX))
    choice = choose_precision("auto", tmp_path, AMX)
    assert (choice.precision, choice.how) == ("bf16", "measured")
    assert "f32 500/s, bf16 1105/s, int8 956/s" in choice.why and AMX["model"] in choice.why


def test_a_measurement_from_another_cpu_is_served_and_flagged(tmp_path):
    """An image built on an AMX host and run on an AMD one: the record still decides, doctor fails."""
    write_record(tmp_path, record(AMX))
    amd = {"model": "AMD EPYC 9B14", "flags": ["avx512f", "avx512_bf16", "avx512_vnni"]}
    choice = choose_precision("auto", tmp_path, amd)
    assert (choice.precision, choice.how) == ("bf16", "measured-elsewhere")
    assert "not this host's CPU (AMD EPYC 9B14" in choice.why and "--force" in choice.why
    ok, detail, fix = precision_finding({"a@h": {"precision_choice": choice.as_dict()}, "b@h": {}})
    assert not ok and detail.startswith("a@h serve bf16") and "export-model --backend openvino --force" in fix
    here = choose_precision("auto", tmp_path, AMX).as_dict()
    assert precision_finding({"a@h": {"precision_choice": here}})[0] is True
    assert precision_finding({"b@h": {}}) is None  # no worker on OpenVINO: no line

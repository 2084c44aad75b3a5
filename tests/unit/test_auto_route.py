"""The auto runtime's route (worker/runtimes/auto/): from the winners measured at each size to the lane
a forward pass of n texts takes, a RoutedEncoder sending each pass there, and what doctor and the
exporter say of auto workers; the default runtime and its GPU exception."""

from __future__ import annotations

import numpy as np

from inference_tasks.config import Settings
from inference_tasks.ops.runtime_report import runtime_finding, runtime_metric
from inference_tasks.worker.runtimes.auto.choice_record import (
    Lane,
    cpu_key,
    describe,
    lane_for,
    lanes_of,
    read_record,
    write_record,
)
from inference_tasks.worker.runtimes.auto.routed_encoder import RoutedEncoder

CT2, BF16 = "ctranslate2 int8", "openvino bf16"


def test_a_pass_takes_the_winner_of_the_nearest_measured_size_and_equal_neighbours_merge() -> None:
    lanes = lanes_of({"1": CT2, "8": BF16, "64": BF16})
    assert lanes == [Lane(2, CT2), Lane(None, BF16)]
    assert [lane_for(lanes, texts).candidate for texts in (1, 2, 3, 22, 23, 4096)] == [CT2, CT2, BF16, BF16, BF16, BF16]
    assert describe(lanes) == "ctranslate2 int8 (1-2 texts), openvino bf16 (3+ texts)"
    three = lanes_of({"1": CT2, "8": BF16, "64": CT2})
    assert three == [Lane(2, CT2), Lane(22, BF16), Lane(None, CT2)]
    assert describe(three) == "ctranslate2 int8 (1-2 texts), openvino bf16 (3-22 texts), ctranslate2 int8 (23+ texts)"
    assert describe(lanes_of({"1": BF16, "8": BF16, "64": BF16})) == BF16


def test_one_record_per_cpu_kind(tmp_path) -> None:
    amd = {"model": "AMD EPYC", "flags": ["avx512f", "avx512_bf16"]}
    xeon = {"model": "Intel(R) Xeon(R) Platinum 8480+", "flags": ["avx512f", "amx_bf16"]}
    write_record(tmp_path, {"cpu": amd, "winners": {"1": CT2}})
    assert read_record(tmp_path, amd) == {"cpu": amd, "winners": {"1": CT2}}
    assert read_record(tmp_path, xeon) is None and cpu_key(amd) != cpu_key(xeon)


class Recording:
    """An encoder that says which lane ran (the routing is what is tested, not a runtime)."""

    def __init__(self, mark: float) -> None:
        self.mark, self.calls = mark, []
        self.dim, self.batch_size, self.max_pass_tokens, self.precision = 2, 32, None, "int8" if mark else "bf16"

    def encode(self, texts, normalize):
        self.calls.append(len(texts))
        return np.full((len(texts), 2), self.mark, dtype=np.float32)

    def compile(self, threads):
        pass


def test_a_routed_encoder_sends_each_pass_to_its_lane_and_passes_settings_to_every_lane() -> None:
    small, large = Recording(1.0), Recording(0.0)
    routed = RoutedEncoder("m", [(Lane(2, CT2), small), (Lane(None, BF16), large)], {"served": "x"})  # type: ignore[list-item]
    assert routed.encode(["a"], True)[0, 0] == 1.0 and routed.encode(["a"] * 3, True)[0, 0] == 0.0
    assert (small.calls, large.calls) == ([1], [3])
    routed.batch_size, routed.max_pass_tokens = 8, 512
    assert (small.batch_size, large.batch_size, small.max_pass_tokens, large.max_pass_tokens) == (8, 8, 512, 512)
    routed.compile(1)
    assert routed.precision == "int8/bf16"


def test_doctor_fails_an_auto_worker_that_fell_back_to_torch_and_the_exporter_labels_each() -> None:
    measured = {"served": BF16, "how": "measured", "why": "fastest at each size"}
    fallen = {"served": "torch", "how": "fallback", "why": "openvino: OpenVINO is not installed"}
    assert runtime_finding({"a": {"runtime_choice": measured}}) == (True, f"a: {BF16} (fastest at each size)", "")
    ok, detail, fix = runtime_finding({"a": {"runtime_choice": measured}, "b": {"runtime_choice": fallen}})
    assert not ok and detail == "b serves torch: openvino: OpenVINO is not installed" and "export-model" in fix
    assert runtime_finding({"c": {"runtime_choice": None}}) is None
    (family,) = runtime_metric({"b": {"runtime_choice": fallen}})
    assert [sample.labels for sample in family.samples] == [{"worker": "b", "served": "torch", "how": "fallback"}]


def test_auto_is_the_default_runtime_and_means_torch_off_the_cpu() -> None:
    assert Settings.from_env({}).model_backend == "auto"
    assert Settings.from_env({"INFERENCE_BACKEND": "torch"}).model_backend == "torch"
    assert Settings(device="cuda").model_backend == "torch"

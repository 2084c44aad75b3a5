"""The model on OpenVINO (INFERENCE_BACKEND=openvino): the same sentence-transformers model, exported once
to OpenVINO IR, tokenized and pooled exactly as sentence-transformers does, run by OpenVINO's CPU
plugin with one inference thread and one stream per child.

Why not `SentenceTransformer(..., backend="openvino")`: that path goes through optimum-intel, which
requires torchvision, and PyPI's torchvision does not import beside the CPU torch this project pins
(it broke `transformers` imports). OpenVINO's runtime alone (one wheel) runs the exported encoder;
the rest of sentence-transformers' pipeline for this kind of model is small and reproduced in
pipeline_encoder.py (tokenize, pool, normalise), shared with the native BERT runtime. The export
directory has sentence-transformers' own layout (`openvino/openvino_model.xml` beside the tokenizer
and configs), so it also loads with sentence-transformers' backend="openvino" where optimum-intel is
installed.

Fork safety: the worker's main process only reads the IR (XML parsed, weights memory-mapped) and
loads the tokenizer; each child compiles the model after the fork (creating OpenVINO's thread pool
there) and warms it up. tests/worker/test_openvino.py checks that a forked child's first vectors equal a
fresh process's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_tasks.worker.runtimes.export_files import MissingExport
from inference_tasks.worker.runtimes.openvino.export_paths import (
    INT8,
    IR_FILE,
    is_exported,
    missing_export_message,
)
from inference_tasks.worker.runtimes.openvino.precision_choice import host_cpu
from inference_tasks.worker.runtimes.pipeline_encoder import PipelineEncoder

if TYPE_CHECKING:
    import numpy as np

# OpenVINO's CPU plugin: one stream, latency first; threads come from the child's budget. CPU
# pinning off: each process pins its threads from the first core of its affinity mask, so every
# one-thread child landed on the same core, at about half the speed (docs/benchmarks-log.md, "Figures
# behind the code"). The kernel spreads one thread per child across cores by itself.
BASE_CONFIG = {"NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
# Token lengths of the static one-text shapes the auto runtime compiles beside the dynamic model: a lone
# short text padded to the next of these runs 1.5-2 ms sooner than through the dynamic-shape model
# (docs/benchmarks-log.md, "The fast default"); longer texts and batches take the dynamic model.
SHAPE_BUCKETS = (16, 32)


def host_tuning(precision: str, cpu: dict[str, Any]) -> dict[str, Any]:
    """Compile settings measured to pay on this kind of CPU. With AMX and bf16, OpenVINO's fused
    attention kernel (a Snippets subgraph) runs on AVX-512 while separate matrix products run on AMX:
    with Snippets off, 64 short tickets ran 1.17x faster and one text unchanged (docs/benchmarks-log.md,
    "The fast default"). Elsewhere nothing was measured to pay."""
    if "amx_bf16" in cpu["flags"] and precision in ("auto", "bf16"):
        return {"SNIPPETS_MODE": "DISABLE"}
    return {}


class OpenVinoEncoder(PipelineEncoder):
    """An exported sentence-transformers model on OpenVINO's CPU plugin. Compiled per process."""

    backend = "openvino"

    def __init__(
        self, name: str, path: Path, precision: str = "auto", shape_buckets: tuple[int, ...] = (),
        cpu: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        if not is_exported(path):
            raise MissingExport(missing_export_message(name, path, precision))
        import openvino

        self.name = name
        self.path = path
        self.device = "cpu"
        self.batch_size = 32
        self.max_pass_tokens: int | None = None
        self.precision_setting = precision
        # Which precision is served and why (precision_choice.py), set by loader.py.
        self.precision_choice: dict[str, str] | None = None
        # Set by compile(): the precision OpenVINO chose (bf16/f32) and its inference threads.
        self.precision: str | None = None
        self.threads: int | None = None
        self._load_pipeline(path)
        self._core = openvino.Core()
        # Parsed, weights memory-mapped; nothing compiled and no thread pool yet (safe before fork).
        self._model = self._core.read_model(path / IR_FILE)
        self._inputs = [port.get_any_name() for port in self._model.inputs]
        self._request: Any = None
        # One-text static shapes (SHAPE_BUCKETS), compiled beside the dynamic model when asked for.
        self.shape_buckets = tuple(sorted(shape_buckets))
        self._bucket_requests: dict[int, Any] = {}
        # This host's CPU (precision_choice.host_cpu) for host_tuning; compile() records what it applied.
        self.cpu = cpu if cpu is not None else host_cpu()
        self.tuning: dict[str, Any] = {}

    def compile(self, threads: int | None, op_counters: bool = False) -> None:
        """Compile for this process with `threads` inference threads (None: OpenVINO's default);
        `op_counters` turns on OpenVINO's per-op performance counters (op_times; benchmarks only)."""
        config: dict[str, Any] = dict(BASE_CONFIG) | ({"PERF_COUNT": True} if op_counters else {})
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        if self.precision_setting in ("f32", "bf16"):
            config["INFERENCE_PRECISION_HINT"] = self.precision_setting
        self.tuning = host_tuning(self.precision_setting, self.cpu)
        config |= self.tuning
        compiled = self._core.compile_model(self._model, "CPU", config)
        # int8: the quantized IR computes its matrix products in int8 (the runtime's choice, bf16 or
        # f32, elsewhere); reported as int8, what operators asked for and what changes its vectors.
        hint = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        self.precision = INT8 if self.precision_setting == INT8 else hint
        self.threads = int(compiled.get_property("INFERENCE_NUM_THREADS"))
        self._request = compiled.create_infer_request()
        self._bucket_requests = {length: self._static_request(length, config) for length in self.shape_buckets}

    def _static_request(self, length: int, config: dict[str, Any]) -> Any:
        """An inference request for one text of exactly `length` tokens (a static-shape copy of the model)."""
        model = self._model.clone()
        model.reshape({name: [1, length] for name in self._inputs})
        return self._core.compile_model(model, "CPU", config).create_infer_request()

    def op_times(self) -> list[tuple[str, str, str, float]]:
        """(node, operation type, kernel OpenVINO ran it with, milliseconds) per executed node of the last
        inference call, from the performance counters (compile with op_counters): where a precision's
        time goes on this CPU."""
        return [
            (op.node_name, op.node_type, op.exec_type, op.real_time.total_seconds() * 1000)
            for op in self._request.get_profiling_info()
        ]

    def _before_encode(self) -> None:
        if self._request is None:
            self.compile(None)

    def _hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        texts, length = batch["input_ids"].shape
        bucket = next((size for size in self.shape_buckets if length <= size), None) if texts == 1 else None
        if bucket is None:
            return self._request.infer({name: batch[name] for name in self._inputs})[0]
        import numpy as np

        # Padding is masked: the attention mask keeps it out of every real token's state and of the pooling.
        padded = {name: np.pad(batch[name], ((0, 0), (0, bucket - length))) for name in self._inputs}
        return self._bucket_requests[bucket].infer(padded)[0][:, :length]

    def place(self, device: str, dtype: str = "float32") -> None:
        if device != "cpu":
            raise ValueError(f"the OpenVINO backend runs on the CPU only, not {device}")

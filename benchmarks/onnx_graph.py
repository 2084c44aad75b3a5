"""Issue 56, item 3: the project's IR (OpenVINO's own conversion from torch, `export-model --backend
openvino`) compiled bf16 as before, the same IR with OpenVINO's Snippets off (what an AMX host compiles
now: openvino_encoder.host_tuning), and a plain ONNX export of the same weights converted by OpenVINO,
one thread each, alternated round by round: 64 short tickets in one call, and one ticket at a time
(dynamic shapes all, so the graphs and settings are compared and nothing else). Also the least cosine
between their vectors, and with --profile where each one's time goes per op type.

The ONNX export needs the `onnx` package, which is not in the lock (nothing the project serves uses it):
without it the ONNX row is left out; install it for the run and remove it after.

    .venv/bin/python -m benchmarks.onnx_graph                    # ~1 minute
    .venv/bin/pip install onnx && .venv/bin/python -m benchmarks.onnx_graph; .venv/bin/pip uninstall -y onnx ml-dtypes
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, ticket_texts

MODEL = "all-MiniLM-L6-v2"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CONFIG = {"NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False,
          "INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "bf16"}  # fmt: skip


def plain_onnx_model(source: Path, work: Path) -> Any:
    """torch.onnx.export (the TorchScript exporter, opset 17, dynamic batch and length), read by OpenVINO."""
    import openvino
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]

    example = AutoTokenizer.from_pretrained(str(source), local_files_only=True)(["an example"], return_tensors="pt")
    onnx_file = work / "model.onnx"
    torch.onnx.export(
        LastHiddenState(), tuple(example[name] for name in INPUTS), str(onnx_file), input_names=list(INPUTS),
        output_names=["last_hidden_state"], dynamic_axes={name: {0: "batch", 1: "length"} for name in INPUTS},
        dynamo=False, opset_version=17,
    )  # fmt: skip
    return openvino.Core().read_model(str(onnx_file))


def mean_pooled(hidden: Any, mask: Any) -> Any:
    weights = mask[..., None]
    vectors = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    return vectors / ((vectors**2).sum(axis=1, keepdims=True) ** 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--profile", action="store_true", help="OpenVINO's per-op counters: where the time goes")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "onnx_graph.json")
    args = parser.parse_args()
    args.rounds = 2 if args.quick else args.rounds
    import openvino
    import torch
    from transformers import AutoTokenizer

    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.export import export_openvino

    torch.set_num_threads(1)
    source = resolve_model_path(MODEL)
    ours_file = next(export_openvino(Settings(model=MODEL)).path.rglob("openvino_model.xml"))
    core = openvino.Core()
    ours = core.read_model(str(ours_file))
    snippets_off = {**CONFIG, "SNIPPETS_MODE": "DISABLE"}
    settings = {"project IR": (ours, CONFIG), "project IR, Snippets off": (ours, snippets_off)}
    if importlib.util.find_spec("onnx") is not None:
        settings["plain ONNX"] = (plain_onnx_model(source, Path(tempfile.mkdtemp())), CONFIG)
    else:
        print("onnx is not installed: the plain ONNX row is left out (.venv/bin/pip install onnx)")
    requests = {
        name: core.compile_model(model, "CPU", config).create_infer_request()
        for name, (model, config) in settings.items()
    }
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)

    def feed(texts: list[str]) -> dict[str, Any]:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
        return {name: batch[name] for name in INPUTS}

    texts = ticket_texts()
    batch, singles = feed(texts[:64]), [feed([text]) for text in texts[64:96]]
    vectors = {
        name: mean_pooled(request.infer(batch)[0], batch["attention_mask"]) for name, request in requests.items()
    }
    min_cosine = {name: float((vectors["project IR"] * found).sum(axis=1).min()) for name, found in vectors.items()}
    per_round: dict[str, dict[str, list[float]]] = {name: {"batch": [], "one": []} for name in requests}
    for _, name in alternated(list(requests), args.rounds):
        request = requests[name]
        began = time.perf_counter()
        request.infer(batch)
        per_round[name]["batch"].append(64 / (time.perf_counter() - began))
        took = []
        for single in singles:
            began = time.perf_counter()
            request.infer(single)
            took.append((time.perf_counter() - began) * 1000)
        per_round[name]["one"].append(statistics.median(took))
    print(f"CPU: {cpu_name()}; one thread, bf16, {args.rounds} alternated rounds; ops: "
          + ", ".join(f"{name} {len(model.get_ops())}" for name, (model, _) in settings.items()))  # fmt: skip
    for name, rows in per_round.items():
        print(f"  {name}: 64 tickets {statistics.median(rows['batch']):.0f}/s (rounds {min(rows['batch']):.0f}-"
              f"{max(rows['batch']):.0f}); one ticket {statistics.median(rows['one']):.2f} ms (rounds "
              f"{min(rows['one']):.2f}-{max(rows['one']):.2f})")  # fmt: skip
        print(f"    least cosine to the project IR's vectors (64 tickets): {min_cosine[name]:.6f}")
        if args.profile:
            model, config = settings[name]
            print_profile(core.compile_model(model, "CPU", config | {"PERF_COUNT": True}).create_infer_request(), batch)
    write_report(args.out, "onnx_graph", {"rounds": args.rounds, "per_round": per_round, "min_cosine": min_cosine})


def print_profile(request: Any, batch: dict[str, Any], calls: int = 8) -> None:
    """The five op types (with OpenVINO's kernel) that took longest on the 64 tickets, ms per call, on a
    request of its own (one that also ran other shapes reported far less than its wall time)."""
    totals: Counter[tuple[str, str]] = Counter()
    for _ in range(calls):
        request.infer(batch)
        for op in request.get_profiling_info():
            totals[(op.node_type, op.exec_type)] += op.real_time.total_seconds() * 1000 / calls
    print(f"      ops: {sum(totals.values()):.1f} ms per call; "
          + "; ".join(f"{kind} ({kernel}) {ms:.1f}" for (kind, kernel), ms in totals.most_common(5)))  # fmt: skip


if __name__ == "__main__":
    main()

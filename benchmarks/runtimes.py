"""torch versus OpenVINO auto (bf16 where the CPU has it) versus OpenVINO int8 (and Infinity, where set
up), the section `python -m benchmarks.serving --runtimes-only` runs: through Celery and in process,
alternated on the same 64-text batches and on the mixed workload (64-text batches, 10 % texts of 200+
words); then one-text tasks micro-batched by the OpenVINO worker, single sentences, per-child memory
and fork-to-ready times."""

from __future__ import annotations

import argparse
import re
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.bursts import one_text_burst
from benchmarks.harness.report import print_table
from benchmarks.harness.runner import combine, run
from benchmarks.harness.targets import CeleryTarget, Target
from benchmarks.harness.workload import make_batches, ticket_texts
from benchmarks.token_batches import mixed_batches
from tests.support.control import worker_report

SERVED = ["celery", "celery-openvino", "celery-int8"]
RUNTIME_CONFIGS = [*SERVED, "ceiling", "ceiling-openvino", "ceiling-int8"]
CHILD_READY = re.compile(r"child ready ([\d.]+) s after fork")
PRELOADED = re.compile(r"model preloaded in the main process in ([\d.]+) s")


def runtimes_section(targets: dict[str, Target], args: argparse.Namespace, level: int, redis_process: Any) -> dict:
    """torch vs OpenVINO auto vs int8, through Celery and in process, alternated on the same 64-text
    batches and mixed batches; then one-text tasks micro-batched by the OpenVINO worker, single
    sentences through Celery; per-child memory and fork-to-ready times."""
    for name in SERVED:  # all alike: compact results, as a bulk producer asks
        targets[name].encoding = args.runtime_encoding  # type: ignore[attr-defined]
    configs = [*RUNTIME_CONFIGS, *(["infinity"] if "infinity" in targets else [])]
    encoding = args.runtime_encoding or "json"
    batches = make_batches(args.runtime_requests, args.batch, args.seed)
    parts = batched_runs(targets, args, level, redis_process, configs, batches)
    rows = [combine(parts[name]) for name in configs]
    print_table(f"Runtimes: {args.batch} sentences per request, {level} producers, {encoding}", rows)
    mixed = batched_runs(
        targets,
        args,
        level,
        redis_process,
        RUNTIME_CONFIGS,
        mixed_batches(max(1, args.runtime_requests // 2), args.seed),
    )
    mixed_rows = [combine(mixed[name]) for name in RUNTIME_CONFIGS]
    print_table(f"Runtimes: the mixed workload (64 texts, 10 % of 200+ words), {level} producers", mixed_rows)
    texts = ticket_texts()
    one_texts = [texts[i % len(texts)] for i in range(args.one_text_tasks)]
    one_text = one_text_burst(targets["celery-openvino"].worker, one_texts, level)  # type: ignore[attr-defined]
    one_text["sentences_per_s"] = one_text["tasks"] / one_text["wall_s"]
    one_text.pop("latencies", None)
    children = {name: child_facts(targets[name]) for name in SERVED}  # type: ignore[arg-type]
    single = single_sentences(targets, args, level, redis_process, [c for c in configs if not c.startswith("ceiling")])
    figures = runtime_figures(
        {row["config"]: row["sentences_per_s"] for row in rows}, parts, one_text,
        {row["config"]: row["sentences_per_s"] for row in mixed_rows},
        {row["config"]: row["requests_per_s"] for row in single},
    )  # fmt: skip
    for name in SERVED:
        targets[name].encoding = None  # type: ignore[attr-defined]
    return {
        "encoding": encoding,
        "rows": rows,
        "mixed": mixed_rows,
        "single_sentences": single,
        "one_text": one_text,
        "children": children,
        "figures": figures,
        "lines": runtime_lines(figures, one_text, children, single, args.batch, level),
    }


def batched_runs(
    targets: dict[str, Target], args: argparse.Namespace, level: int, redis_process: Any, configs: list[str],
    batches: list[list[str]],
) -> dict[str, list[dict]]:  # fmt: skip
    """Every configuration on the same batches, alternated for --runtime-rounds rounds."""
    parts: dict[str, list[dict]] = {name: [] for name in configs}
    for _, name in alternated(configs, args.runtime_rounds):
        redis = redis_process if name.startswith("celery") else None
        parts[name].append(run(targets[name], batches, level, redis))
        print(f"  {name} at {level} producers: {sentences_per_s(parts[name][-1]):.0f} sentences/s", flush=True)
    return parts


def runtime_figures(
    rate: dict[str, float], parts: dict[str, list[dict]], one_text: dict, mixed: dict[str, float],
    single: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """The section's ratios, from sentences/s per configuration (64-text batches, mixed, single)."""
    figures: dict[str, Any] = {
        "openvino_vs_torch_celery": rate["celery-openvino"] / rate["celery"],
        "openvino_celery_vs_ceiling": rate["celery-openvino"] / rate["ceiling-openvino"],
        "openvino_vs_torch_ceiling": rate["ceiling-openvino"] / rate["ceiling"],
        "openvino_one_text_vs_batched": one_text["sentences_per_s"] / rate["celery-openvino"],
        "int8_vs_openvino_celery": rate["celery-int8"] / rate["celery-openvino"],
        "int8_vs_torch_celery": rate["celery-int8"] / rate["celery"],
        "int8_vs_openvino_ceiling": rate["ceiling-int8"] / rate["ceiling-openvino"],
        "int8_vs_openvino_celery_mixed": mixed["celery-int8"] / mixed["celery-openvino"],
        "int8_vs_torch_celery_mixed": mixed["celery-int8"] / mixed["celery"],
        "int8_vs_openvino_celery_single": single["celery-int8"] / single["celery-openvino"],
    }
    # The same ratio round by round: both ran minutes apart at most, so the host's drift (this
    # shared machine's speed moves by several percent within minutes) cancels within a round.
    figures["openvino_celery_vs_ceiling_per_round"] = [
        sentences_per_s(served) / sentences_per_s(ceiling)
        for served, ceiling in zip(parts["celery-openvino"], parts["ceiling-openvino"], strict=True)
    ]
    if "infinity" in rate:
        figures["celery_openvino_vs_infinity"] = rate["celery-openvino"] / rate["infinity"]
    return figures


def runtime_lines(
    figures: dict[str, Any], one_text: dict, children: dict, single: list[dict], batch: int, level: int
) -> list[str]:
    """The section's figures as the lines the summary prints."""
    per_round = figures["openvino_celery_vs_ceiling_per_round"]
    lines = [
        f"celery-openvino / celery (torch): {figures['openvino_vs_torch_celery']:.2f}x sentences/s (target >= 2.5)",
        f"celery-openvino / ceiling-openvino: {figures['openvino_celery_vs_ceiling']:.3f} (target >= 0.95; "
        f"per round {', '.join(f'{ratio:.3f}' for ratio in per_round)})",
        f"ceiling-openvino / ceiling (torch): {figures['openvino_vs_torch_ceiling']:.2f}x",
        f"celery-int8 / celery-openvino: {figures['int8_vs_openvino_celery']:.2f}x on {batch}-text batches "
        "(goal >= 1.6), "
        f"{figures['int8_vs_openvino_celery_single']:.2f}x single sentences (goal >= 2), "
        f"{figures['int8_vs_openvino_celery_mixed']:.2f}x mixed; in process {figures['int8_vs_openvino_ceiling']:.2f}x",
        f"celery-int8 / celery (torch): {figures['int8_vs_torch_celery']:.2f}x on {batch}-text batches (goal >= 4), "
        f"{figures['int8_vs_torch_celery_mixed']:.2f}x mixed",
        f"one-text tasks micro-batched on OpenVINO: {one_text['sentences_per_s']:.0f} sentences/s, "
        f"{figures['openvino_one_text_vs_batched']:.2f}x the {batch}-text batches (target >= 0.6)",
    ]
    for name, facts in children.items():
        lines.append(
            f"{name}: children RSS {', '.join(f'{mib:.0f}' for mib in facts['rss_mib'])} MiB, "
            f"fork to ready {', '.join(f'{s:.2f}' for s in facts['ready_s'])} s, model preload in the main "
            f"process {', '.join(f'{s:.2f}' for s in facts['preload_s'])} s, precision {facts['precision']}"
        )
    for row in single:
        lines.append(
            f"single sentences, {level} producers: {row['config']} {row['requests_per_s']:.0f}/s, "
            f"p50 {row['latency_p50_s'] * 1000:.0f} ms, p95 {row['latency_p95_s'] * 1000:.0f} ms"
        )
    if "celery_openvino_vs_infinity" in figures:
        lines.append(
            f"celery-openvino / infinity ({batch}-text requests): {figures['celery_openvino_vs_infinity']:.2f}x"
        )
    return lines


def single_sentences(
    targets: dict[str, Target], args: argparse.Namespace, level: int, redis_process: Any, configs: list[str]
) -> list[dict]:
    """One text per request, `level` closed-loop producers, alternated: what an app embedding one
    title at a time sees (Celery micro-batches them in the worker, Infinity in its server)."""
    texts = make_batches(args.runtime_requests * 4, 1, args.seed + 7)
    parts: dict[str, list[dict]] = {name: [] for name in configs}
    for _, name in alternated(configs, 2 if args.runtime_rounds > 1 else 1):
        redis = redis_process if name.startswith("celery") else None
        parts[name].append(run(targets[name], texts, level, redis))
    rows = [combine(parts[name]) for name in configs]
    print_table(f"Single sentences ({level} producers)", rows)
    return rows


def sentences_per_s(part: dict) -> float:
    return part["sentences"] / part["wall_s"]


def child_facts(target: CeleryTarget) -> dict:
    """Each child's RSS and precision (the workers' own report) and fork-to-ready times (their log)."""
    report = worker_report(target.worker.app)
    return {
        "rss_mib": [child["rss_bytes"] / 2**20 for child in report["children"]],
        "precision": sorted({child["precision"] or "?" for child in report["children"]}),
        "ready_s": [float(ready) for ready in CHILD_READY.findall(target.worker.log())],
        "preload_s": [float(seconds) for seconds in PRELOADED.findall(target.worker.log())],
    }

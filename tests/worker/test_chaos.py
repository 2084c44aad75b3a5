"""The chaos soak's quick run (benchmarks/chaos.py --quick): a Sentinel-managed Redis and two workers on
simulated hosts, under mixed Python and Ruby load with durable pushes, while every
fault kind of the suite hits once, several at once. Every task is accounted for: nothing lost (a
message in flight to a consumer that a fault cut off included: the atomic take records it), no valid
task failed, every hostile message failed, every duplicate explained by a fault that held it, one
reply job per run, and Redis memory back at its baseline, net of what it keeps by design (the durable
claims, the dead letters: benchmarks/harness/chaos/memory.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.chaos import NET_MEMORY_TOLERANCE_BYTES
from benchmarks.harness.chaos.faults import KINDS
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.programs import need_program

pytestmark = pytest.mark.worker


@pytest.mark.timeout(300)
@pytest.mark.external
def test_the_quick_chaos_soak_accounts_for_every_task(tmp_path):
    need_program("ruby", "ruby ruby-redis")
    out = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.chaos", "--quick", "--out", str(out)],
        cwd=REPO_ROOT, env=clean_env(), capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    tasks = report["tasks"]
    print(f"\n[chaos --quick] {report['summary_line']}; send errors retried {report['send_errors_retried']}")
    expected = set(KINDS) if report["simulated_hosts"] else set(KINDS) - {"partition"}
    assert {fault["kind"] for fault in report["faults"]} == expected, report["fault_errors"]
    assert report["problems"] == [] and report["fault_errors"] == []
    assert tasks["lost"] == 0 and tasks["failed_unexpectedly"] == 0
    assert tasks["ran_twice_unaccounted"] == []
    assert tasks["failed_as_expected"] >= 6 and tasks["succeeded"] > 100  # six hostile messages carry an id
    assert {"embed-1", "embed-64", "classify", "reply", "ruby"} <= set(tasks["sent_by_kind"])
    memory = report["redis_memory"]
    assert memory["kept_by_design"]["durable_claims"] >= tasks["succeeded"] - 10  # every push durable
    assert memory["net_final_minus_baseline_bytes"] <= NET_MEMORY_TOLERANCE_BYTES
    if "the timeline was not drawn" not in done.stdout:  # a plot that hangs is cut short (benchmarks/chaos.py)
        assert out.with_suffix(".png").stat().st_size > 10_000

"""`inference-tasks probe --live/--ready` (ops/probe.py) over the state a worker's main process rewrites
every second (worker/lifecycle/probe_state.py): a real worker goes from not ready to ready, and to not live
while its main process is frozen; the verdicts themselves on made-up states."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from inference_tasks.ops.probe import liveness, readiness, running_states
from inference_tasks.worker.lifecycle.probe_state import state_file, write_state
from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.waiting import wait_until

NOW = 1_000_000.0


def state(**overrides) -> dict:
    return {"node": "inference@h", "pid": os.getpid(), "beat": NOW - 0.5, "ready": True, "reason": "",
            "children": 2, "children_warm": 2, **overrides}  # fmt: skip


def test_live_is_a_recent_beat_or_a_reconnect_within_its_grace():
    assert liveness([state()], 10, NOW)[0]
    silent = liveness([state(beat=NOW - 30)], 10, NOW)
    assert not silent[0] and "main process silent for 30.0 s" in silent[1]
    assert liveness([state(beat=NOW - 30, quiet_until=NOW + 5)], 10, NOW)[0]
    assert liveness([], 10, NOW) == (
        False,
        "no worker state here: not started yet, stopped, or another INFERENCE_PROBE_DIR",
    )


def test_ready_needs_every_worker_ready_and_redis_answering():
    def ping() -> None:
        return None

    def refused() -> None:
        raise ConnectionError("Connection refused")

    assert readiness([state()], 10, NOW, ping) == (True, "ready: inference@h (2/2 children warm); Redis answers")
    warming = readiness([state(), state(node="b@h", ready=False, reason="no child has warmed up yet")], 10, NOW, ping)
    assert warming == (False, "b@h: not ready: no child has warmed up yet")
    assert readiness([state()], 10, NOW, refused) == (
        False,
        "Redis does not answer: ConnectionError: Connection refused",
    )
    assert not readiness([state(beat=NOW - 30)], 10, NOW, ping)[0]  # not live: not ready either


def test_the_state_of_a_process_that_is_gone_is_ignored(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_state(state_file(tmp_path, "old@h"), state(node="old@h", pid=int(gone.stdout)))
    write_state(state_file(tmp_path, "inference@h"), state())
    assert [found["node"] for found in running_states(tmp_path)] == ["inference@h"]
    assert running_states(tmp_path, node="other@h") == []


def run_probe(probe_dir, redis_url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "probe", *args],
        cwd=REPO_ROOT, env=clean_env(REDIS_URL=redis_url, INFERENCE_PROBE_DIR=str(probe_dir)),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_a_worker_is_probed_not_ready_then_ready_then_not_live_while_frozen(start_worker, tmp_path):
    """Local exec probes against a real worker: not ready while it loads, ready once a child is warm and
    Redis answers; SIGSTOP to the main process makes it not live (and not ready) within the max age,
    SIGCONT live again; after a warm shutdown there is nothing to probe."""
    probes = tmp_path / "probes"
    worker = start_worker(concurrency=1, probe_dir=str(probes), wait_ready=False)
    first = run_probe(probes, worker.redis_url, "--ready")
    assert first.returncode == 1 and first.stdout.startswith("FAIL ready: "), first.stdout
    wait_until(lambda: run_probe(probes, worker.redis_url, "--ready").returncode == 0, 120, "the worker to be ready")
    ready = run_probe(probes, worker.redis_url, "--ready")
    assert ready.stdout.startswith("OK ready: ready: ") and "(1/1 children warm); Redis answers" in ready.stdout
    assert run_probe(probes, worker.redis_url, "--live").returncode == 0
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: run_probe(probes, worker.redis_url, "--live", "--max-age", "3").returncode == 1, 30, "not live"
        )
        frozen = run_probe(probes, worker.redis_url, "--live", "--max-age", "3")
        assert "main process silent for" in frozen.stdout, frozen.stdout
        assert run_probe(probes, worker.redis_url, "--ready", "--max-age", "3").returncode == 1
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    wait_until(lambda: run_probe(probes, worker.redis_url, "--live", "--max-age", "3").returncode == 0, 30, "live")
    assert worker.stop() == 0
    gone = run_probe(probes, worker.redis_url, "--live")
    assert gone.returncode == 1 and "no worker state here" in gone.stdout

"""Worker lifecycle through real `celery worker` processes: pinning, loading, recycling, child death."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from collections import Counter

import pytest

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY
from inference_tasks.routing import EMBED_TASK, TRAINING_QUEUE, WORKER_INFO_TASK
from tests.support.control import worker_report
from tests.support.events import EventRecorder
from tests.support.local import redis_client
from tests.support.localstack import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 60
SENTENCES = [f"Sentence number {i} about the weather, the markets and the city council." for i in range(32)]


def infos_from_every_child(worker, children: int, rounds: int = 40) -> dict[int, dict]:
    """worker_info from each child: send bursts until every child has answered at least once."""
    seen: dict[int, dict] = {}
    for _ in range(rounds):
        burst = [worker.app.send_task(WORKER_INFO_TASK) for _ in range(children * 2)]
        for result in burst:
            info = result.get(timeout=RESULT_TIMEOUT_S)
            seen[info["pid"]] = info
        if len(seen) >= children:
            return seen
    raise AssertionError(f"only {len(seen)} of {children} children answered worker_info")


def test_pinned_children_run_one_native_thread_each_and_stay_flat(inference_worker):
    """Shipped profile: both children report torch=1, every native pool=1, and a small OS thread
    count that does not grow across 20 embed tasks; the prefork parent stays single-digit."""
    before = infos_from_every_child(inference_worker, children=2)
    results = [inference_worker.app.send_task(EMBED_TASK, args=[SENTENCES]) for _ in range(20)]
    assert all(r.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384 for r in results)
    after = infos_from_every_child(inference_worker, children=2)
    for info in [*before.values(), *after.values()]:
        assert info["profile"] == "inference"
        assert info["thread_budget"] == 1
        assert info["torch_threads"] == 1
        assert info["torch_interop_threads"] == 1
        # The default model on the native BERT encoder: torch without sentence-transformers, transformers
        # or scikit-learn (~4 s of a cold start; worker/runtimes/torch/native_bert.py).
        assert info["engine"] == "native-bert" and info["loaded_runtimes"] == ["torch"]
        assert info["native_pools"], "threadpoolctl saw no native pool"
        assert {pool["num_threads"] for pool in info["native_pools"]} == {1}
        # What a pinned process may run: its main thread, one thread per native pool it loaded (each
        # pinned to 1; OpenMP and BLAS run their single thread in the caller, so this is slack), and
        # torch's inter-op thread. A library default (one per core) on any pool breaks the bound as
        # soon as cores > 1 (the unpinned control below shows it).
        allowed = 1 + len(info["native_pools"]) + info["torch_interop_threads"]
        assert info["os_threads"] <= allowed, (info["os_threads"], allowed, info["native_pools"])
        # The prefork main process: the same, plus the lease-renewal thread (leases.py).
        assert info["parent"]["os_threads"] <= allowed + 1, (info["parent"], allowed)
    for pid, info in after.items():
        if pid in before:
            assert info["os_threads"] <= before[pid]["os_threads"]
    assert sum(info["tasks_served"] for info in after.values()) >= 20


def test_without_pinning_children_run_more_threads(start_worker, inference_worker):
    """The control: with INFERENCE_PIN_THREADS=false the same work leaves more threads per child,
    so the pinned test above can fail."""
    unpinned = start_worker(concurrency=2, pin_threads="false")
    for worker in (unpinned, inference_worker):
        results = [worker.app.send_task(EMBED_TASK, args=[SENTENCES]) for _ in range(4)]
        assert all(r.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384 for r in results)
    pinned_max = max(i["os_threads"] for i in infos_from_every_child(inference_worker, 2).values())
    loose = infos_from_every_child(unpinned, 2).values()
    cores = len(os.sched_getaffinity(0))
    for info in loose:
        assert info["thread_budget"] is None
        assert info["model_load_mode"] == "in-child", "an unpinned worker must not preload (libgomp after fork)"
        assert info["os_threads"] > pinned_max, (info["os_threads"], pinned_max)
        if cores > 1:
            assert info["torch_threads"] > 1
            assert max(pool["num_threads"] for pool in info["native_pools"]) > 1


def test_preloaded_children_share_the_models_pages(start_worker):
    """Shipped: the main process loads the model, children only warm up and share its pages
    copy-on-write, so a fresh child's private memory (USS) is smaller than with in-child loading.
    (safetensors maps the weight files, so in-child loading shares most weight pages too.)"""
    shipped = start_worker(concurrency=2)
    in_child = start_worker(concurrency=2, preload_model="false")
    preloaded = infos_from_every_child(shipped, 2).values()
    loaded_alone = infos_from_every_child(in_child, 2).values()
    assert {info["model_load_mode"] for info in preloaded} == {"preloaded"}
    assert {info["model_load_mode"] for info in loaded_alone} == {"in-child"}
    for info in [*preloaded, *loaded_alone]:
        assert info["warmup_seconds"] is not None and info["ready_seconds_after_fork"] is not None
        assert info["dim"] == 384
        assert info["uss_bytes"] < info["pss_bytes"] < info["rss_bytes"]
    private_preloaded = max(info["uss_bytes"] for info in preloaded)
    private_in_child = min(info["uss_bytes"] for info in loaded_alone)
    # The mechanism: loading builds the model's Python objects, tokenizer tables and non-mapped tensors
    # on the heap; a child that loads them holds them privately, a preloaded child shares the main
    # process's copy. Preloading must save at least a quarter of a child's private memory
    # (measured here: ~62 MB private per in-child child, ~24 MB preloaded, a 60 % saving).
    assert private_preloaded < 0.75 * private_in_child, (private_in_child, private_preloaded)
    assert "model preloaded in the main process" in shipped.log()
    assert "child ready" in in_child.log()


def test_each_child_draws_its_own_recycle_limit_and_keeps_it(start_worker):
    """max_tasks_per_child=6 with jitter 0.5: every child recycles after 3 to 6 tasks of its own
    choosing, and never serves more than its own limit (billiard's loop obeys it)."""
    worker = start_worker(concurrency=2, max_tasks_per_child=6, max_tasks_per_child_jitter=0.5)
    outcomes = [worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S) for _ in range(40)]
    limits = {info["pid"]: info["recycle_after_tasks"] for info in outcomes}
    served: dict[int, int] = {}
    for info in outcomes:
        served[info["pid"]] = max(served.get(info["pid"], 0), info["tasks_served"] + 1)
    assert all(3 <= limit <= 6 for limit in limits.values()), limits
    assert all(served[pid] <= limits[pid] for pid in served), (served, limits)
    # 40 tasks over children serving at most 6 each: at least 7 children, and with a uniform
    # draw from 3-6 the chance that all of them drew 6 is below 1 in 16,000.
    assert len(limits) >= 7
    assert min(limits.values()) < 6, limits
    # Recycled children end promptly with their recycle exit code, never logged as killed.
    assert "exited with 'signal" not in worker.log()


def test_a_child_whose_model_failed_to_load_fails_every_task_clearly(start_worker, tmp_path):
    """A model that cannot load must not leave a silently broken child: tasks fail with
    'model not loaded: <reason>', and worker_info still answers with the reason. (A directory that
    does not exist at all is refused before the worker starts, naming it.)"""
    missing = tmp_path / "no-such-model"
    refused = start_worker(concurrency=1, model=str(missing), wait_ready=False)
    wait_until(lambda: refused.process.poll() is not None, 120, "the worker to refuse to start")
    assert f"INFERENCE_MODEL='{missing}' is neither a model of the catalogue" in refused.log()
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    broken = start_worker(concurrency=1, model=str(empty))
    result = broken.app.send_task(EMBED_TASK, args=[["hello"]])
    with pytest.raises(Exception) as raised:
        result.get(timeout=RESULT_TIMEOUT_S)
    assert result.state == "FAILURE"
    assert "model not loaded" in str(raised.value)
    assert str(empty) in str(raised.value)
    info = broken.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert info["model"] is None and info["model_error"]
    assert broken.process.poll() is None


# Long: recycling by task count stays in the default suite twice over (each child's own limit, above, and the
# limit counted in tasks under micro-batching, below).
@pytest.mark.long
def test_recycling_after_max_tasks_replaces_children_and_loses_nothing(start_worker):
    """worker_max_tasks_per_child=3: children are replaced (new pids) and all 30 tasks succeed; no child
    runs more tasks than its own limit."""
    worker = start_worker(concurrency=2, max_tasks_per_child=3)
    initial = set(worker.child_pids())
    results = []
    for index in range(15):
        results.append(worker.app.send_task(EMBED_TASK, args=[[f"text {index}"]]))
        results.append(worker.app.send_task(WORKER_INFO_TASK))
    outcomes = [r.get(timeout=RESULT_TIMEOUT_S) for r in results]
    assert all(r.state == "SUCCESS" for r in results)
    pids = {o["pid"] for o in outcomes if "pid" in o}
    assert len(pids) >= 4, pids
    infos = [o for o in outcomes if "jobs_done" in o]
    assert infos and all(o["tasks_served"] < o["recycle_after_tasks"] <= 3 for o in infos), infos
    assert not initial & set(worker.child_pids())
    # The pool counts every child that left and was reaped (the exporter's children_exited): at least
    # the two first ones, gone from the process table.
    report = worker_report(worker.app)
    assert report["children_exited"] >= len(initial), (report["children_exited"], initial)


def test_a_child_runs_at_most_its_task_limit_even_when_its_tasks_come_in_a_micro_batch(start_worker):
    """INFERENCE_MAX_TASKS_PER_CHILD counts tasks, not pool jobs: 12 one-text tasks held while the only
    child is busy (its 2nd task) go to it as one batch job; the child runs the 1-3 its limit (4 or 5)
    leaves, and the rest go on as jobs of their own to its replacements. Every task succeeds and no
    child process runs more than 5."""
    worker = start_worker(concurrency=1, include="tests.support.worker_probes", max_tasks_per_child=5)
    redis = redis_client(worker.redis_url)
    # A first embed opens the batcher's extra unit of the prefetch window (worker/batching/batcher.py), so tasks
    # are taken from the queue and held while the only child is busy.
    worker.app.send_task(EMBED_TASK, args=[["the first text"]]).get(timeout=RESULT_TIMEOUT_S)
    gate = f"gate:{uuid.uuid4()}"
    busy = worker.app.send_task("tests.wait_for_gate", args=[gate, 60])
    wait_until(lambda: busy.state == "STARTED", RESULT_TIMEOUT_S, "the only child to be busy")
    held = [worker.app.send_task(EMBED_TASK, args=[[f"held text {i}"]]) for i in range(12)]
    wait_until(lambda: redis.llen("inference") == 0, 30, "the held tasks to be taken from the queue")
    redis.rpush(gate, "open")
    busy.get(timeout=RESULT_TIMEOUT_S)
    assert all(result.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384 for result in held)
    log = worker.log()
    assert "coalesced 12 tasks (12 texts) into one job" in log
    assert re.search(r"recycle limit: running [1-3] tasks of this batch, \d+ go on alone", log), log[-3000:]

    def successes_per_child() -> Counter:
        return Counter(re.findall(r"/(ForkPoolWorker-\d+)\] Task [\w.]+\[[\w-]+\] succeeded", worker.log()))

    def all_fourteen_logged() -> Counter | None:
        counts = successes_per_child()
        return counts if sum(counts.values()) == 14 else None

    # A child logs "succeeded" just after storing the result: wait for all 14 (the first embed, the
    # gate task and the 12) before counting them per child.
    per_child = wait_until(all_fourteen_logged, 30, "every success line", details=lambda: str(successes_per_child()))
    assert max(per_child.values()) <= 5 and len(per_child) >= 3, per_child


# Long: the chaos soak's quick run (tests/worker/test_chaos.py) kills a child under load in the default suite.
@pytest.mark.long
def test_a_child_killed_mid_task_loses_nothing(start_worker):
    """kill -9 of the child running a task: the task is requeued, runs again, and succeeds."""
    worker = start_worker(concurrency=2, include="tests.support.worker_probes")
    marker = f"attempts:{uuid.uuid4()}"
    redis = redis_client(worker.redis_url)
    held = worker.app.send_task("tests.hold", args=[marker, 3.0])
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the task to start")
    victim = int(redis.lindex(marker, 0))
    os.kill(victim, signal.SIGKILL)
    outcome = held.get(timeout=RESULT_TIMEOUT_S)
    assert outcome["attempt"] == 2
    assert outcome["pid"] != victim
    assert held.state == "SUCCESS"
    assert worker.app.send_task(EMBED_TASK, args=[["after the kill"]]).get(timeout=RESULT_TIMEOUT_S)["dim"] == 384


class _RunsCodeWhenUnpickled:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mknod, (self.marker,))


def test_a_pickled_message_is_never_executed(inference_worker, tmp_path):
    """A message in pickle format is refused before decoding: its payload never runs, the task
    fails with a message naming the content type, it is dead-lettered, and the worker serves on."""
    marker = tmp_path / "pickle-payload-ran"
    sent = inference_worker.app.send_task(EMBED_TASK, args=[[_RunsCodeWhenUnpickled(str(marker))]], serializer="pickle")
    after = inference_worker.app.send_task(EMBED_TASK, args=[["a valid task after it"]])
    assert after.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384
    with pytest.raises(Exception, match="content-type 'application/x-python-serialize' is not accepted"):
        sent.get(timeout=RESULT_TIMEOUT_S)
    assert not marker.exists()
    dead = [json.loads(entry) for entry in redis_client(inference_worker.redis_url).lrange(DEAD_LETTER_KEY, 0, -1)]
    assert sent.id in {entry["task_id"] for entry in dead}
    assert inference_worker.process.poll() is None


@pytest.mark.parametrize(
    "options",
    [{"pool": "solo"}, {"pool": "prefork", "concurrency": 1, "profile": "trainer"}],
    ids=["solo", "prefork-1"],
)
def test_trainer_profile_is_one_process_using_the_configured_threads(start_worker, options):
    """The trainer (queue training; the solo pool, or one prefork child with INFERENCE_PROFILE=trainer)
    is not pinned: its one task process runs trainer_threads native threads."""
    trainer = start_worker(queues=TRAINING_QUEUE, trainer_threads=3, **options)
    info = trainer.app.send_task(WORKER_INFO_TASK, queue=TRAINING_QUEUE).get(timeout=RESULT_TIMEOUT_S)
    assert info["profile"] == "trainer"
    task_processes = [trainer.process.pid] if options["pool"] == "solo" else trainer.child_pids()
    assert task_processes == [info["pid"]]
    assert info["torch_threads"] == 3
    assert {pool["num_threads"] for pool in info["native_pools"]} == {3}
    assert info["model"] == "all-MiniLM-L6-v2"


def test_importing_the_package_does_not_import_torch():
    """Producers, Flower and the CLI import the app: that must not load torch or the model."""
    import subprocess
    import sys

    code = "import sys, inference_tasks; inference_tasks.app.conf.broker_url; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_adaptive_threads_lend_idle_cores_and_take_them_back(start_worker):
    """INFERENCE_ADAPTIVE_THREADS=true: a child alone runs on the whole budget (2 threads); while
    its sibling is busy it runs on one; once the sibling is done, on two again."""
    worker = start_worker(concurrency=2, adaptive_threads="true", include="tests.support.worker_probes")
    alone = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert alone["adaptive_threads"] is True and alone["thread_budget"] == 1
    assert alone["torch_threads"] == 2
    marker = f"busy:{uuid.uuid4()}"
    held = worker.app.send_task("tests.hold", args=[marker, 4.0])
    redis = redis_client(worker.redis_url)
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the holding task to start")
    busy_pid = int(redis.lindex(marker, 0))
    sharing = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert sharing["pid"] != busy_pid
    assert sharing["torch_threads"] == 1
    held.get(timeout=RESULT_TIMEOUT_S)
    again = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert again["torch_threads"] == 2
    assert "adaptive threads: a child alone may use up to 2 threads" in worker.log()


# Long: what it guards (worker/celery_ext/task_events.py's flush at shutdown) changes rarely.
@pytest.mark.long
def test_task_events_still_buffered_at_a_warm_shutdown_are_sent(start_worker):
    """Task events wait for the flush timer (here longer than the test); a warm shutdown sends them."""
    worker = start_worker(concurrency=1, task_events_flush_ms=600_000)
    with EventRecorder(worker.app) as recorder:
        result = worker.app.send_task(EMBED_TASK, args=[["a parcel that never arrived"]])
        assert len(result.get(timeout=120)["embeddings"]) == 1
        assert not recorder.of_type("task-succeeded", result.id)  # still buffered: the timer is 10 minutes
        assert worker.stop() == 0
        wait_until(lambda: recorder.of_type("task-succeeded", result.id), 30, "the buffered task-succeeded event")
    assert recorder.of_type("task-received", result.id) and recorder.of_type("task-started", result.id)

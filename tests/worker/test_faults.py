"""Fault injection through real workers and Redis: each case runs real tasks while a fault hits, then
counts: every valid task has one SUCCESS, none is lost, the worker still serves, the trace is there.

Figures each case measures are printed (run with -s) and recorded in docs/reliability.md.
"""

from __future__ import annotations

import array
import base64
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import termios
import threading
import time
import uuid
from collections import Counter

import pytest
from celery.exceptions import TimeoutError

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY
from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from tests.support.local import redis_client, start_redis
from tests.support.localstack import RedisServer, producer_app
from tests.support.waiting import poll_until, wait_until
from tests.support.wire import encode, task_message

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
REDIS_DOWN_S = 3.0
PROBES = "tests.support.worker_probes"
BATCH = [f"Support ticket {i}: the export to PDF fails after the last update." for i in range(16)]


def report(case: str, **figures: object) -> None:
    print(f"\n[fault] {case}: " + ", ".join(f"{key}={value}" for key, value in figures.items()))


def wait_all(results, timeout: float = RESULT_TIMEOUT_S) -> dict[str, int]:
    """Wait for every result; count terminal states."""
    deadline = time.monotonic() + timeout
    states: dict[str, int] = {}
    for result in results:
        with contextlib.suppress(TimeoutError):  # a timeout counts as the state the task is left in
            result.get(timeout=max(1.0, deadline - time.monotonic()), propagate=False)
        states[result.state] = states.get(result.state, 0) + 1
    return states


def count_repeats(results, *workers) -> int:
    """Every result is SUCCESS; returns how many task ids the workers' own logs show succeeding more than
    once (at-least-once delivery allows it; callers that promise exactly once assert it is 0)."""
    assert {r.state for r in results} == {"SUCCESS"}
    ids = [r.id for r in results]
    logged: list[Counter] = [Counter()]

    def every_success_logged() -> bool:
        logged[0] = sum((w.successes() for w in workers), start=Counter())
        return all(logged[0][i] for i in ids)

    # Success log lines land just after results (a SIGKILL may cut one off): wait a little, then count.
    poll_until(every_success_logged, 10, poll_s=0.1)
    return sum(1 for i in ids if logged[0][i] > 1)


def started_pids(redis, results) -> dict[str, int]:
    """Task id -> the pid of the child running it, for tasks whose stored state is STARTED."""
    metas = redis.mget([f"celery-task-meta-{r.id}" for r in results])
    running = {}
    for result, raw in zip(results, metas, strict=True):
        meta = json.loads(raw) if raw else {}
        if meta.get("status") == "STARTED":
            running[result.id] = meta["result"]["pid"]
    return running


def unread_pipe_bytes(pid: int) -> int:
    """Bytes waiting in the pipes a process holds (FIONREAD through /proc/<pid>/fd): a frozen child's
    job, written by the parent and not yet read."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        with contextlib.suppress(OSError):
            if not os.readlink(path).startswith("pipe:"):
                continue
            handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                waiting = array.array("i", [0])
                fcntl.ioctl(handle, termios.FIONREAD, waiting)
                total += waiting[0]
            finally:
                os.close(handle)
    return total


def mutate(change) -> dict:
    message = task_message(EMBED_TASK, [["a malformed neighbour"]])
    change(message)
    return message


def b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def _drop(path: str):
    def change(message: dict) -> None:
        *parents, last = path.split(".")
        target = message
        for key in parents:
            target = target[key]
        del target[last]

    return change


def _set(path: str, value: object):
    def change(message: dict) -> None:
        *parents, last = path.split(".")
        target = message
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def nested(depth: int) -> object:
    value: object = "a text"
    for _ in range(depth):
        value = [value]
    return value


def _with_header(name: str, value: object):
    return _set(f"headers.{name}", value)


MAX_MESSAGE_BYTES = 200_000
# name -> (raw message, a phrase the refusal must contain)
MALFORMED = {
    "not-json": (b"\x00 definitely not json", "not JSON"),
    "not-utf8": (b"\xff\xfe\xfd", "not UTF-8"),
    "json-array": (b"[1, 2, 3]", "not a Celery message envelope"),
    "json-number": (b"42", "not a Celery message envelope"),
    "no-content-type": (mutate(_drop("content-type")), "content-type is missing"),
    "pickle": (mutate(_set("content-type", "application/x-python-serialize")), "is not accepted"),
    "yaml": (mutate(_set("content-type", "application/x-yaml")), "'application/x-yaml' is not accepted"),
    "no-headers": (mutate(_drop("headers")), "no headers object"),
    "no-id": (mutate(_drop("headers.id")), "headers.id must be"),
    "no-task-name": (mutate(_drop("headers.task")), "headers.task must be"),
    "no-delivery-tag": (mutate(_drop("properties.delivery_tag")), "delivery_tag must be"),
    "no-delivery-info": (mutate(_drop("properties.delivery_info")), "delivery_info object is missing"),
    "no-exchange": (mutate(_drop("properties.delivery_info.exchange")), "delivery_info.exchange"),
    "no-routing-key": (mutate(_drop("properties.delivery_info.routing_key")), "delivery_info.routing_key"),
    "bad-base64": (mutate(_set("body", "%%% not base64 %%%")), "body is not base64"),
    "body-object": (mutate(_set("body", b64({"texts": ["a"]}))), "body must be the JSON array"),
    "args-object": (mutate(_set("body", b64([{"texts": ["a"]}, {}, {}]))), "body[0] (args) must be an array"),
    "bad-eta": (mutate(_set("headers.eta", "tomorrow")), "headers.eta must be"),
    "enormous": (task_message(EMBED_TASK, [["x" * MAX_MESSAGE_BYTES]]), "over the limit of 200000"),
    # Valid JSON that killed every worker in turn (issue 26): texts nested 900 lists deep.
    "900-deep": (task_message(EMBED_TASK, [nested(900)]), "body is nested 902 levels deep"),
    "deep-header": (mutate(_with_header("x-trace", nested(40))), "message is nested 42 levels deep"),
    "deep-argument": (task_message(EMBED_TASK, [["a"]], {"normalize": nested(12)}), "kwargs['normalize'] is nested"),
    "celery-backend-cleanup": (task_message("celery.backend_cleanup", []), "is not a task producers may send here"),
    "celery-chord-unlock": (task_message("celery.chord_unlock", ["x"]), "'celery.chord_unlock' is not a task"),
    "unknown-task": (task_message("inference.no_such_task", [["x"]]), "'inference.no_such_task' is not a task"),
    "far-eta": (mutate(_with_header("eta", "2999-01-01T00:00:00+00:00")), "beyond the scheduling horizon of 3600 s"),
}


@pytest.fixture(scope="module")
def fault_worker(start_worker):
    return start_worker(concurrency=2, include=PROBES, max_redeliveries=2, max_message_bytes=MAX_MESSAGE_BYTES)


def test_malformed_messages_are_dead_lettered_and_valid_neighbours_complete(fault_worker):
    """Every malformed raw message (broken protocol; too deep or too big; Celery's built-in or unknown task
    names; an ETA beyond the horizon) is refused with a named reason, dead-lettered, FAILURE where its id
    is known; the valid raw messages pushed around them all succeed; the worker keeps consuming."""
    redis = redis_client(fault_worker.redis_url)
    valid, malformed_ids = [], {}
    for name, (message, _) in MALFORMED.items():
        for _ in range(2):
            good = task_message(EMBED_TASK, [[f"valid neighbour of {name}"]])
            valid.append(good["headers"]["id"])
            redis.lpush("inference", encode(good))
        redis.lpush("inference", encode(message))
        if isinstance(message, dict) and isinstance(message.get("headers"), dict) and message["headers"].get("id"):
            malformed_ids[name] = message["headers"]["id"]
    wrong_shape = task_message(EMBED_TASK, [42])
    redis.lpush("inference", encode(wrong_shape))

    results = [fault_worker.app.AsyncResult(task_id) for task_id in valid]
    states = wait_all(results)
    assert states == {"SUCCESS": len(valid)}
    for name, task_id in malformed_ids.items():
        failed = fault_worker.app.AsyncResult(task_id)
        failed.get(timeout=RESULT_TIMEOUT_S, propagate=False)
        assert failed.state == "FAILURE", name
        assert MALFORMED[name][1] in str(failed.result), (name, failed.result)
    failed = fault_worker.app.AsyncResult(wrong_shape["headers"]["id"])
    failed.get(timeout=RESULT_TIMEOUT_S, propagate=False)
    assert failed.state == "FAILURE" and "texts must be a list of strings" in repr(failed.result)

    dead = [json.loads(entry) for entry in redis.lrange(DEAD_LETTER_KEY, 0, -1)]
    for name, (_, phrase) in MALFORMED.items():
        assert any(phrase in entry["reason"] for entry in dead), f"{name} not dead-lettered"
    assert 0 < redis.ttl(DEAD_LETTER_KEY) <= 7 * 86_400
    log = fault_worker.log()
    assert log.count("refused a message from queue 'inference'") >= len(MALFORMED)
    assert "Unrecoverable error" not in log
    assert redis.llen("inference") == 0
    wait_until(lambda: redis.hlen("unacked") == 0, 30, "every message to be acknowledged")
    assert fault_worker.process.poll() is None
    report("malformed producers", malformed=len(MALFORMED), valid_sent=len(valid), completed=states["SUCCESS"], lost=0)


def test_a_refused_message_that_asked_for_a_reply_still_gets_its_failure_reply(fault_worker):
    """A message refused by screening (a bad eta) whose sidekiq_reply request is itself valid: its FAILURE
    reply job is pushed anyway, naming the reason, so a Rails app waiting for the reply never waits forever."""
    redis = redis_client(fault_worker.redis_url)
    queue = f"replies-{uuid.uuid4().hex[:8]}"
    message = mutate(_set("headers.eta", "tomorrow"))
    message["headers"]["sidekiq_reply"] = {"class": "EmbeddingReadyJob", "queue": queue, "context": {"record_id": 7}}
    redis.lpush("inference", encode(message))
    job = json.loads(wait_until(lambda: redis.lindex(f"queue:{queue}", 0), RESULT_TIMEOUT_S, "the reply job"))
    [outcome] = job["args"]
    assert job["class"] == "EmbeddingReadyJob" and redis.sismember("queues", queue)
    assert (outcome["task_id"], outcome["task"]) == (message["headers"]["id"], EMBED_TASK)
    assert outcome["state"] == "FAILURE" and outcome["result"] is None
    assert outcome["error"]["type"] == "MalformedMessage" and "headers.eta must be" in outcome["error"]["message"]
    assert outcome["context"] == {"record_id": 7}


def test_a_poison_task_is_retried_a_bounded_number_of_times_then_failed(fault_worker):
    """A task that kills its child every time runs max_redeliveries + 1 times, then is FAILURE with the
    reason and dead-lettered; 50 valid tasks sent alongside all succeed."""
    marker = f"attempts:{uuid.uuid4()}"
    redis = redis_client(fault_worker.redis_url)
    poison = fault_worker.app.send_task("tests.crash", args=[marker])
    valid = [fault_worker.app.send_task(EMBED_TASK, args=[BATCH[:4]]) for _ in range(50)]
    with pytest.raises(Exception, match="redelivered 3 times without completing"):
        poison.get(timeout=RESULT_TIMEOUT_S)
    assert redis.llen(marker) == 3
    states = wait_all(valid)
    assert states == {"SUCCESS": 50}
    dead = [json.loads(entry) for entry in redis.lrange(DEAD_LETTER_KEY, 0, -1)]
    assert any(entry["task_id"] == poison.id and "redelivered" in entry["reason"] for entry in dead)
    assert fault_worker.process.poll() is None
    report("poison task", attempts=redis.llen(marker), valid_sent=50, completed=states["SUCCESS"], lost=0)


# Long: the chaos soak's quick run (tests/worker/test_chaos.py) covers this fault in the default suite.
@pytest.mark.long
def test_children_killed_mid_task_under_load_lose_nothing(fault_worker):
    """120 tasks of 64 texts (each goes alone: at or above the micro-batch size); three times during the
    run a child seen running a task (its state STARTED with that child's pid) is killed with SIGKILL:
    each kill loses a running task (WorkerLostError in the log), which is requeued, and every task
    succeeds."""
    redis = redis_client(fault_worker.redis_url)
    lost_before = fault_worker.log().count("WorkerLostError")
    results = [fault_worker.app.send_task(EMBED_TASK, args=[BATCH * 4]) for _ in range(120)]
    killed: list[int] = []
    for _ in range(3):

        def a_child_running_a_task() -> int | None:
            alive = set(fault_worker.child_pids())
            running = [pid for pid in started_pids(redis, results).values() if pid in alive and pid not in killed]
            return running[0] if running else None

        pid = wait_until(a_child_running_a_task, RESULT_TIMEOUT_S, "a child running a task")
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    states = wait_all(results)
    assert states == {"SUCCESS": 120}
    assert len(killed) == 3
    assert fault_worker.log().count("WorkerLostError") - lost_before >= 3
    duplicated = count_repeats(results, fault_worker)
    report("child kill -9 under load", sent=120, children_killed=len(killed), completed=120, lost=0,
           duplicated=duplicated)  # fmt: skip


LEASE_TEST_VISIBILITY_S = 6
LEASE_TEST_RENEW_S = 2


# Long: the chaos soak's quick run kills a whole worker under load in the default suite (its held
# tasks come back through the sweep), and test_delivery_e2e.py renews a lease past the visibility timeout.
@pytest.mark.long
def test_leases_keep_long_tasks_and_a_dead_workers_tasks_come_back_fast(start_worker):
    """A 10 s task outlives a 6 s visibility timeout without a second delivery (its lease is renewed);
    then kill -9 of a whole worker holding a task: another worker runs it within timeout + sweep.
    Shorter than the shipped 20 s / 5 s so the test takes half a minute less; the mechanism is the same."""
    leases = {"visibility_timeout_s": LEASE_TEST_VISIBILITY_S, "lease_renew_interval_s": LEASE_TEST_RENEW_S}
    first = start_worker(concurrency=1, include=PROBES, **leases)
    second = start_worker(concurrency=1, include=PROBES, redis_url=first.redis_url, **leases)
    redis = redis_client(first.redis_url)

    long_marker = f"attempts:{uuid.uuid4()}"
    long_task = first.app.send_task("tests.hold", args=[long_marker, 10.0])
    assert long_task.get(timeout=RESULT_TIMEOUT_S)["attempt"] == 1
    assert redis.llen(long_marker) == 1

    marker = f"attempts:{uuid.uuid4()}"
    held = first.app.send_task("tests.hold", args=[marker, 600.0, 0.0])
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the held task to start")
    holder_pid = int(redis.lindex(marker, 0))
    holder = first if holder_pid in first.child_pids() else second
    survivor = second if holder is first else first
    killed_at = time.monotonic()
    holder.kill()
    wait_until(lambda: redis.llen(marker) >= 2, 60, "the dead worker's task to come back")
    recovery_s = time.monotonic() - killed_at
    outcome = held.get(timeout=RESULT_TIMEOUT_S)
    assert outcome["attempt"] == 2 and outcome["pid"] in survivor.child_pids()
    # visibility timeout + one sweep interval (the renewal interval) + scheduling slack
    assert recovery_s <= LEASE_TEST_VISIBILITY_S + LEASE_TEST_RENEW_S + 5, recovery_s
    report("whole-worker kill -9", long_task_attempts=1, redelivered_after_s=round(recovery_s, 1), lost=0)


@pytest.fixture
def aof_redis(tmp_path) -> RedisServer:
    server = start_redis(tmp_path / "aof", appendonly=True)
    yield server
    if server.process.poll() is None:
        server.process.terminate()
        server.process.wait(timeout=10)


# Long: the chaos soak's quick run kills the Redis primary under load, and cuts a worker's connection
# and restores it to the same address (a partition), in the default suite.
@pytest.mark.long
def test_redis_restart_under_load_loses_nothing(start_worker, aof_redis, tmp_path):
    """Redis (AOF on) is shut down and started again while 200 tasks are queued and running: the worker
    reconnects by itself and every task succeeds."""
    worker = start_worker(concurrency=2, redis_url=aof_redis.url(0))
    redis = redis_client(aof_redis.url(0))
    results = [worker.app.send_task(EMBED_TASK, args=[BATCH]) for _ in range(200)]
    # Under load: some tasks done, some running (unacked), most still queued.
    wait_until(lambda: worker.successes() and redis.hlen("unacked") > 0, RESULT_TIMEOUT_S, "tasks done and running")
    subprocess.run(["redis-cli", "-p", str(aof_redis.port), "shutdown"], check=False, capture_output=True)
    aof_redis.process.wait(timeout=20)
    down_at = time.monotonic()
    time.sleep(REDIS_DOWN_S)  # the fault itself: Redis stays down this long
    restarted = start_redis(tmp_path / "aof", appendonly=True, port=aof_redis.port)
    aof_redis.process = restarted.process
    states = wait_all(results, timeout=180)
    assert states == {"SUCCESS": 200}, states
    duplicated = count_repeats(results, worker)
    assert worker.process.poll() is None
    assert worker.app.send_task(EMBED_TASK, args=[["after the restart"]]).get(timeout=60)["dim"] == 384
    report("redis restart", sent=200, completed=200, lost=0, duplicated=duplicated,
           recovered_after_s=round(time.monotonic() - down_at, 1))  # fmt: skip


# Long: the chaos soak's quick run restarts both workers one at a time under load in the default suite.
@pytest.mark.long
def test_rolling_restart_under_steady_load_loses_and_rejects_nothing(start_worker):
    """Two workers restarted one at a time (TERM, wait, start) while a producer sends 220 tasks at a steady
    rate: all succeed, none twice; a task running when TERM arrives finishes on the old worker."""
    first = start_worker(concurrency=2, include=PROBES)
    second = start_worker(concurrency=2, include=PROBES, redis_url=first.redis_url)
    redis = redis_client(first.redis_url)
    results, sending = [], threading.Event()

    def produce() -> None:
        app = producer_app(first.redis_url)  # its own connections: apps are not shared across threads
        for _ in range(220):
            results.append(app.send_task(EMBED_TASK, args=[BATCH]))
            time.sleep(0.08)
        sending.set()

    producer = threading.Thread(target=produce)
    producer.start()
    marker = f"attempts:{uuid.uuid4()}"
    running = first.app.send_task("tests.hold", args=[marker, 4.0])
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the held task to start")
    holder = first if int(redis.lindex(marker, 0)) in first.child_pids() else second
    other = second if holder is first else first
    for worker in (holder, other):
        assert worker.stop() == 0
        worker.launch()
    producer.join()
    states = wait_all(results)
    assert states == {"SUCCESS": 220}, states
    assert running.get(timeout=RESULT_TIMEOUT_S)["attempt"] == 1
    duplicated = count_repeats(results, first, second)
    assert duplicated == 0
    report("rolling restart", sent=220, completed=220, lost=0, duplicated=duplicated, running_task_attempts=1)


def freeze_with_an_empty_pipe(child: int) -> None:
    """SIGSTOP the child at a moment its pipe holds nothing unread (the pool may still be writing it
    its start-up messages just after it logs "child ready"): thawed again and retried until so."""
    for _ in range(50):
        wait_until(lambda: unread_pipe_bytes(child) == 0, 30, "the child to read what its pipe holds")
        os.kill(child, signal.SIGSTOP)
        if unread_pipe_bytes(child) == 0:
            return
        os.kill(child, signal.SIGCONT)
    raise AssertionError("the child's pipe never stayed empty long enough to freeze it")


def test_a_job_in_a_childs_pipe_when_a_warm_shutdown_begins_runs_once_and_is_acked(start_worker):
    """When a warm shutdown begins, Celery's pool forgets every job its child has not yet confirmed
    (AsynPool.flush), though the child will still read it from its pipe and run it; the result
    then matches nothing, the message is never acked, goes back to the queue at disconnect and runs
    again elsewhere (1-2 of 300 tasks in the rolling restart on a busy host). Here the child is
    frozen between the parent writing the job into its pipe and reading it, the worker is TERMed,
    then the child is thawed: the task runs once and its message is acknowledged, not re-queued."""
    worker = start_worker(concurrency=1, include=PROBES)
    redis = redis_client(worker.redis_url)
    wait_until(lambda: "child ready" in worker.log(), 60, "the child to warm up")
    # A first task seen done by the parent proves the pool has the child's WORKER_UP ("child ready"
    # is logged just before the child sends it) and the child's slot free again (the child stores
    # the result before it tells the parent): a child frozen before either is never written a job.
    [child] = worker.child_pids()
    first = worker.app.send_task(WORKER_INFO_TASK)
    assert first.get(timeout=RESULT_TIMEOUT_S)["pid"] == child
    wait_until(lambda: f"{first.id}] succeeded" in worker.log(), 30, "the parent to see the first task done")
    freeze_with_an_empty_pipe(child)
    try:
        result = worker.app.send_task(EMBED_TASK, args=[BATCH[:2]])
        wait_until(lambda: unread_pipe_bytes(child) > 0, 30, "the parent to write the job into the frozen child's pipe")
        worker.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "pool flushed" in worker.log(), 30, "the warm shutdown's pool flush")
        assert "kept 1 job(s) already written to a child" in worker.log()
    finally:
        os.kill(child, signal.SIGCONT)
    assert worker.process.wait(timeout=60) == 0
    assert len(result.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 2
    assert redis.llen("inference") == 0, "the message went back to the queue: it would run again"
    assert redis.hlen("unacked") == 0
    assert worker.successes()[result.id] == 1


def test_term_to_the_whole_process_group_is_still_a_warm_shutdown(start_worker):
    """SIGTERM to every process of the worker at once (systemd's default KillMode, honcho): the running
    task still finishes on its first attempt and the worker exits cleanly."""
    worker = start_worker(concurrency=2, include=PROBES)
    redis = redis_client(worker.redis_url)
    marker = f"attempts:{uuid.uuid4()}"
    running = worker.app.send_task("tests.hold", args=[marker, 4.0])
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the held task to start")
    os.killpg(worker.process.pid, signal.SIGTERM)
    assert worker.process.wait(timeout=60) == 0
    assert running.get(timeout=RESULT_TIMEOUT_S)["attempt"] == 1
    assert "WorkerLostError" not in worker.log()


def test_a_memory_limit_below_the_loaded_footprint_refuses_to_start(start_worker):
    """INFERENCE_MAX_MEMORY_PER_CHILD_MB below what a loaded child uses stops the worker with the reason,
    instead of recycling every child after each task forever."""
    worker = start_worker(concurrency=1, max_memory_per_child_mb=100, wait_ready=False)
    worker.process.wait(timeout=RESULT_TIMEOUT_S)
    log = worker.log()
    assert "INFERENCE_MAX_MEMORY_PER_CHILD_MB=100 is below the" in log
    assert "Stopping the worker" in log


def test_a_leaking_child_is_recycled_by_the_memory_limit_and_nothing_is_lost(start_worker):
    """A task that leaks what takes its child 200 MB past INFERENCE_MAX_MEMORY_PER_CHILD_MB=1000: the child
    is replaced after that task, and the 20 tasks queued behind it all succeed. The leak is sized from
    the child's own RSS (a fixed 600 MB stopped crossing the limit when the native encoder made children
    ~150 MB smaller)."""
    worker = start_worker(concurrency=1, include=PROBES, max_memory_per_child_mb=1000)
    resident_mb = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)["rss_bytes"] >> 20
    leak_mb = 1000 - resident_mb + 200
    leaked_in = worker.app.send_task("tests.leak", args=[leak_mb]).get(timeout=RESULT_TIMEOUT_S)["pid"]
    results = [worker.app.send_task(EMBED_TASK, args=[BATCH[:4]]) for _ in range(20)]
    assert wait_all(results) == {"SUCCESS": 20}
    after = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert after["pid"] != leaked_in
    assert after["rss_bytes"] < 1000 * 1024 * 1024
    report("memory leak recycle", leaked_mb=leak_mb, sent=20, completed=20, lost=0)

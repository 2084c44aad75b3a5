"""Device placement: which GPU each child uses (a pure function, tested without a GPU), `auto` falling
back to the CPU, and the worker's main process never initialising CUDA (checked on real workers)."""

from __future__ import annotations

import os

import pytest

from inference_tasks import devices
from inference_tasks.routing import EMBED_TASK, WORKER_INFO_TASK
from inference_tasks.worker.host import gpu
from tests.support.control import ask_once, worker_report
from tests.support.waiting import wait_until

RESULT_TIMEOUT_S = 120


@pytest.mark.parametrize(
    ("setting", "child", "gpus", "expected"),
    [
        ("cpu", 3, 4, "cpu"),
        ("auto", 0, 0, "cpu"),
        ("auto", 3, 2, "cuda:1"),
        ("cuda", 0, 1, "cuda:0"),
        ("cuda", 7, 1, "cuda:0"),  # one GPU: no round-robin at all
        ("cuda", 5, 4, "cuda:1"),
        ("cuda", None, 4, "cuda:0"),  # a solo worker
        ("cuda:1", 0, 2, "cuda:1"),
        ("cuda:1", 3, 2, "cuda:1"),
    ],
)
def test_child_i_gets_gpu_i_mod_the_visible_count(setting, child, gpus, expected):
    assert devices.choose_device(setting, child, gpus) == expected


@pytest.mark.worker
def test_a_recycled_child_takes_its_slot_and_so_its_slots_gpu(start_worker):
    """The device is a function of the pool slot (choose_device), and a real worker whose children are
    recycled every 2 tasks gives each replacement the slot it replaces: after several recycles the
    children have new pids but the same slots {0, 1}, so on CUDA each would come back to its GPU."""
    worker = start_worker(concurrency=2, max_tasks_per_child=2, max_tasks_per_child_jitter=0, microbatch_max_texts=0)

    def children() -> dict[int, int]:
        report = ask_once(worker.app)  # None when the busy main process missed this broadcast
        return {child["pid"]: child["slot"] for child in report["children"]} if report else {}

    before = wait_until(lambda: len(c := children()) == 2 and c, 60, "both children")
    results = [worker.app.send_task(EMBED_TASK, args=[["recycle me"]]) for _ in range(8)]
    assert all(len(r.get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1 for r in results)
    # 8 jobs, 2 per child: at least 2 replacements beyond the first two children.
    wait_until(lambda: worker.log().count("child ready") >= 4, 60, "replacement children")
    after = wait_until(lambda: (c := children()) and len(c) == 2 and set(c).isdisjoint(before) and c, 60, "new pids")
    assert sorted(before.values()) == sorted(after.values()) == [0, 1]
    assert [devices.choose_device("cuda", slot, 2) for slot in sorted(after.values())] == ["cuda:0", "cuda:1"]


@pytest.mark.parametrize(("setting", "gpus"), [("cuda", 0), ("cuda:0", 0), ("cuda:2", 2)])
def test_asking_for_a_gpu_that_is_not_there_says_so(setting, gpus):
    with pytest.raises(devices.NoGpu, match=setting):
        devices.choose_device(setting, 0, gpus)


def test_default_children_follow_gpus_on_cuda_and_cores_on_cpu():
    assert devices.default_concurrency("cpu", 4, 2, cores=16) == 16
    assert devices.default_concurrency("auto", 0, 2, cores=16) == 16
    assert devices.default_concurrency("cuda", 4, 2, cores=16) == 8
    assert devices.default_concurrency("auto", 1, 3, cores=16) == 3
    assert devices.default_concurrency("cuda:1", 4, 2, cores=16) == 2


@pytest.mark.parametrize(
    ("visible", "expected"), [(None, 4), ("0,1", 2), ("", 0), ("-1", 0), ("1,-1,2", 1), ("0,1,2,3,4,5", 4)]
)
def test_gpus_counted_from_the_driver_and_cuda_visible_devices_without_torch(tmp_path, visible, expected):
    for index in range(4):
        (tmp_path / f"0000:0{index}:00.0").mkdir()
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert devices.gpus_on_this_host(environ, tmp_path) == expected
    assert devices.gpus_on_this_host(environ, tmp_path / "no-driver") == 0


def test_mps_is_active_only_while_a_daemon_reads_its_control_pipe(tmp_path):
    """The daemon's control FIFO outlives the daemon (`quit` leaves it): a pipe nobody reads is no MPS."""
    environ = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    assert not gpu.mps_active(environ)
    os.mkfifo(tmp_path / "control")
    assert not gpu.mps_active(environ)  # left behind by a daemon that quit
    reader = os.open(tmp_path / "control", os.O_RDONLY | os.O_NONBLOCK)  # as the listening daemon holds it
    try:
        assert gpu.mps_active(environ)
    finally:
        os.close(reader)
    assert not gpu.mps_active(environ)


NO_GPU = pytest.mark.skipif(
    devices.gpus_on_this_host(os.environ) > 0, reason="asserts the CPU fallback: this host has a GPU"
)


@NO_GPU
@pytest.mark.worker
def test_auto_falls_back_to_cpu_and_the_main_process_never_initialises_cuda(start_worker):
    """On this GPU-less machine `auto` serves from the CPU; every child reports its device, and the
    worker's main process (which preloads the model) has no CUDA context."""
    worker = start_worker(concurrency=2, device="auto")
    result = worker.app.send_task(EMBED_TASK, args=[["auto placement"]]).get(timeout=RESULT_TIMEOUT_S)
    assert len(result["embeddings"][0]) == 384
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert (info["device"], info["encode_batch_size"], info["gpu_memory"]) == ("cpu", 32, None)
    report = worker_report(worker.app)
    assert "main" in report, report
    assert report["main"]["cuda_initialized"] is False
    assert [child["device"] for child in report["children"]] == ["cpu", "cpu"]
    assert report["device_setting"] == "auto"


@NO_GPU
@pytest.mark.worker
def test_cuda_without_a_gpu_fails_each_task_with_the_reason_and_the_worker_stays_up(start_worker):
    worker = start_worker(concurrency=1, device="cuda")
    failed = worker.app.send_task(EMBED_TASK, args=[["needs a gpu"]])
    with pytest.raises(Exception, match="no CUDA device is visible"):
        failed.get(timeout=RESULT_TIMEOUT_S)
    assert worker.process.poll() is None
    info = worker.app.send_task(WORKER_INFO_TASK).get(timeout=RESULT_TIMEOUT_S)
    assert "no CUDA device is visible" in info["model_error"]

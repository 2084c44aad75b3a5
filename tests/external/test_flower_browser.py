"""A real browser on Flower: headless Chromium (Debian `chromium`) loads the dashboard served next to a
real worker, shows the worker online and its completed `inference.embed` tasks, and leaves a
screenshot in test-artifacts/ for people to look at."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from inference_tasks.routing import EMBED_TASK
from tests.support.local import running_flower
from tests.support.localstack import REPO_ROOT
from tests.support.operator_tools import flower_api
from tests.support.programs import need_program
from tests.support.waiting import poll_until, wait_until

pytestmark = pytest.mark.worker
ARTIFACTS = REPO_ROOT / "test-artifacts"
TASKS = 4


def chromium_binary() -> str:
    return shutil.which("chromium-browser") or need_program("chromium", "chromium")


def browse(binary: str, profile_dir, *args: str) -> str:
    """One headless Chromium run (as root it needs --no-sandbox); JavaScript runs for up to 10 s."""
    command = [
        binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
        f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000", *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def seen_whole(port: int, ids: set[str], timeout: float) -> bool:
    """Flower's API lists every task of `ids` as an inference.embed that succeeded, within `timeout`."""

    def listed() -> bool:
        seen = flower_api(port, "/api/tasks?state=SUCCESS")
        return all(seen.get(task_id, {}).get("name") == EMBED_TASK for task_id in ids)

    return bool(poll_until(listed, timeout, poll_s=0.5))


def test_flower_dashboard_shows_the_worker_and_its_embed_tasks_in_chromium(inference_worker, tmp_path):
    """The session's shipped worker (only what it sends while Flower runs is on Flower's pages)."""
    binary = chromium_binary()
    worker = inference_worker
    node = f"{worker.name}@"
    with running_flower([], worker.redis_url, FLOWER_UNAUTHENTICATED_API="true") as (_, port):
        # Flower answers /healthcheck before its event receiver has subscribed: a task sent earlier
        # shows up later without its name (seen on CI). Wait until one probe is seen whole.
        wait_until(
            lambda: seen_whole(port, {worker.app.send_task(EMBED_TASK, args=[["probe"]]).id}, timeout=5),
            60,
            "Flower to record a whole task from the worker's events",
        )
        results = [worker.app.send_task(EMBED_TASK, args=[[f"browser check {i}"]]) for i in range(TASKS)]
        ids = {result.id for result in results}
        for result in results:
            result.get(timeout=120)
        assert seen_whole(port, ids, timeout=60), f"Flower's API does not list every one of {sorted(ids)}"
        listed = flower_api(port, "/api/workers?refresh=1")
        assert any(name.startswith(node) for name in listed), f"the Flower API lists {sorted(listed)}"

        workers_page = browse(binary, tmp_path / "profile", "--dump-dom", f"http://127.0.0.1:{port}/workers")
        tasks_page = browse(binary, tmp_path / "profile", "--dump-dom", f"http://127.0.0.1:{port}/tasks")
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot = ARTIFACTS / "flower-dashboard.png"
        screenshot.unlink(missing_ok=True)
        browse(binary, tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1400,900",
               f"http://127.0.0.1:{port}/workers")  # fmt: skip
        tasks_screenshot = ARTIFACTS / "flower-tasks.png"
        tasks_screenshot.unlink(missing_ok=True)
        browse(binary, tmp_path / "profile", f"--screenshot={tasks_screenshot}", "--window-size=1400,900",
               f"http://127.0.0.1:{port}/tasks")  # fmt: skip

    assert node in workers_page
    assert "Online" in workers_page
    assert "inference.embed" in tasks_page
    assert sum(task_id in tasks_page for task_id in ids) == TASKS, "every completed task is listed"
    assert "SUCCESS" in tasks_page
    for image in (screenshot, tasks_screenshot):
        data = image.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, image

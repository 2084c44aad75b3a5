"""The operator's tools as tests drive them: the `inference-tasks` CLI run as a command, the Prometheus
exporter started and scraped, Flower's HTTP API read."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from contextlib import contextmanager

from prometheus_client.parser import text_string_to_metric_families

from tests.support.local import clean_env, served_process
from tests.support.localstack import REPO_ROOT, free_port
from tests.support.waiting import wait_until


def cli(*args: str, redis_url: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", *args],
        cwd=REPO_ROOT,
        env=clean_env(REDIS_URL=redis_url, COLUMNS="200", **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def exporter(
    redis_url: str,
    command: tuple[str, ...] = (sys.executable, "-m", "inference_tasks.ops.cli"),
    cwd=REPO_ROOT,
    extra_env: dict[str, str] | None = None,
):
    port = free_port()
    command_line = [*command, "metrics", "--port", str(port)]
    with served_process(command_line, cwd, clean_env(REDIS_URL=redis_url, **(extra_env or {}))) as (process, output):

        def answers() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).close()
                return True
            except OSError:
                assert process.poll() is None, output()
                return False

        wait_until(answers, 60, "the exporter to answer", poll_s=0.3)
        yield port


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def flower_api(port: int, path: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.loads(response.read())

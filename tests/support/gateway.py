"""`inference-tasks gateway` as tests run it: a real process on a free loopback port, yielded once it
answers /health/live, stopped after; and the official OpenAI client's own venv (.venv-openai)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT, free_port
from tests.support.programs import missing
from tests.support.waiting import wait_until

OPENAI_VENV_PYTHON = REPO_ROOT / ".venv-openai" / "bin" / "python"
OPENAI_CALLS = REPO_ROOT / "tests" / "support" / "openai_calls.py"
GATEWAY = [sys.executable, "-m", "inference_tasks.ops.cli", "gateway"]


@dataclass
class RunningGateway:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: Any = None, key: str | None = None,
                raw: bytes | None = None) -> tuple[int, Any, Any]:  # fmt: skip
        """(status, headers (case-insensitive), JSON body) of one HTTP request, errors included."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if key is not None:
            request.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, answer.headers, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, error.headers, json.loads(error.read())


@contextlib.contextmanager
def running_gateway(redis_url: str, log_dir: Path, *args: str, **env: str) -> Iterator[RunningGateway]:
    """`inference-tasks gateway --port <free> <args>` on `redis_url` with INFERENCE_GATEWAY_* in `env`."""
    port = free_port()
    log = log_dir / f"gateway-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([*GATEWAY, "--port", str(port), *args], cwd=REPO_ROOT, stdout=out,
                                   stderr=subprocess.STDOUT, env=clean_env(REDIS_URL=redis_url, **env))  # fmt: skip
    gateway = RunningGateway(process, port, log)
    try:

        def live() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"the gateway exited: {log.read_text()[-2000:]}")
            try:
                return gateway.request("GET", "/health/live")[0] == 200
            except OSError:
                return False

        wait_until(live, 60, "the gateway to answer /health/live", poll_s=0.1)
        yield gateway
    finally:
        process.terminate()
        process.wait(timeout=30)


def openai_client_calls(spec: dict[str, Any]) -> dict[str, Any]:
    """What tests/support/openai_calls.py reports, run by the official client's own venv."""
    if not OPENAI_VENV_PYTHON.exists():
        missing("the OpenAI client's venv is missing (bash scripts/setup_openai_client.sh)")
    # Nothing of this project reaches that process: no PYTHONPATH, no INFERENCE_* settings.
    bare = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([str(OPENAI_VENV_PYTHON), str(OPENAI_CALLS)], input=json.dumps(spec).encode(),
                          capture_output=True, timeout=300, env=bare)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report

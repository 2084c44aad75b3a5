"""Flower through our app: loopback by default, basic auth from settings, refusal when exposed without auth."""

from __future__ import annotations

import base64
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest

from inference_tasks.ops.flower_guard import is_loopback
from tests.support.local import clean_env, running_flower
from tests.support.localstack import REPO_ROOT


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.8.0.3", True), ("::1", True), ("localhost", True), ("", False),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("no-such-host.invalid", False)],
)  # fmt: skip
def test_loopback_addresses(address, loopback):
    """Only addresses that stay on this host count as loopback; '' and 0.0.0.0 mean every interface."""
    assert is_loopback(address) is loopback


def test_flower_refuses_a_public_address_without_auth(redis_server):
    """--address=0.0.0.0 without any auth: Flower does not start, and says how to fix it."""
    args = [sys.executable, "-m", "celery", "-A", "inference_tasks", "flower", "--address=0.0.0.0", "--port=1"]
    out = subprocess.run(
        args, cwd=REPO_ROOT, env=clean_env(REDIS_URL=redis_server.url(0)), capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "refusing to start Flower on 0.0.0.0:1 without authentication" in out.stderr + out.stdout
    assert "INFERENCE_FLOWER_BASIC_AUTH" in out.stderr + out.stdout


def test_plain_flower_listens_on_loopback_only(redis_server):
    """`celery -A inference_tasks flower` with no --address binds 127.0.0.1, not every interface."""
    with running_flower([], redis_server.url(0)) as (flower, _):
        listening = {c.laddr.ip for c in psutil.Process(flower.pid).net_connections() if c.status == "LISTEN"}
    assert listening == {"127.0.0.1"}


def test_basic_auth_from_settings_protects_flower_on_a_public_address(redis_server):
    """INFERENCE_FLOWER_BASIC_AUTH lets Flower bind 0.0.0.0; its API then needs the credentials, while
    /healthcheck stays open (as documented)."""
    env = {"INFERENCE_FLOWER_BASIC_AUTH": "ops:s3cret-pass", "FLOWER_UNAUTHENTICATED_API": "false"}
    with running_flower(["--address=0.0.0.0"], redis_server.url(0), **env) as (_, port):
        url = f"http://127.0.0.1:{port}/api/workers"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=5)
        assert refused.value.code == 401
        token = base64.b64encode(b"ops:s3cret-pass").decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200

"""Run the Ruby client scripts in tests/ruby against a real worker (Ruby from Debian's packages)."""

from __future__ import annotations

import json
import subprocess

from conftest import REPO_ROOT, clean_env

from tests.support.programs import need_program

RUBY_DIR = REPO_ROOT / "tests" / "ruby"


def need(program: str) -> str:
    return need_program(program, "ruby ruby-redis ruby-sidekiq")


def ruby(script: str, redis_url: str, **env: str) -> dict:
    """Run a Ruby script against `redis_url` (with extra environment `env`); it prints one JSON object."""
    out = subprocess.run(
        [need("ruby"), str(RUBY_DIR / script)],
        env=clean_env(REDIS_URL=redis_url, **env),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])

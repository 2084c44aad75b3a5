"""Programs the tests drive (redis-server, ruby, sidekiq, chromium, systemd-analyze): skipped locally when
missing, a failure under CI (CI=true, set by .ci/run), where scripts/setup.sh must have installed them."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.support import tiers


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def long_tests_wanted() -> bool:
    """INFERENCE_LONG_TESTS=1 runs the tests marked `long` too (docs/testing.md)."""
    return os.environ.get("INFERENCE_LONG_TESTS", "").lower() in ("1", "true", "yes")


def missing(message: str) -> None:
    """Skip the test here; fail it on CI, where a missing program means setup is broken."""
    if on_ci():
        pytest.fail(f"{message}: scripts/setup.sh must install it for CI")
    pytest.skip(message)


def need_program(program: str, package: str) -> str:
    """The program's path, or skip/fail (see module docstring). Ruby, Sidekiq, a browser, netns tools and
    systemd-analyze only in a test marked `external` (tiers.py)."""
    tiers.refuse_unless_external(program)
    path = shutil.which(program)
    if path is None:
        missing(f"{program} is not installed (apt-get install {package})")
    return path  # type: ignore[return-value]

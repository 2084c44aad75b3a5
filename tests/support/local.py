"""The local stack as tests use it: a clean environment, a redis-server that skips locally when missing
(and fails on CI), a Redis client, Flower on a free port. Imported by tests and conftest alike."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import redis

from tests.support import localstack
from tests.support.localstack import REPO_ROOT, MissingProgram, RedisServer, free_port
from tests.support.programs import missing
from tests.support.waiting import wait_until


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without project or thread settings, plus `overrides`."""
    return localstack.clean_env(os.environ, **overrides)


def start_redis(workdir: Path, **options: object) -> RedisServer:
    """localstack.start_redis, skipped locally (failed on CI) when redis-server is missing."""
    try:
        return localstack.start_redis(workdir, **options)  # type: ignore[arg-type]
    except MissingProgram as error:
        missing(str(error))


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


@contextlib.contextmanager
def running_flower(flower_args: list[str], redis_url: str, **env: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """`celery -A inference_tasks flower <flower_args> --port=<free>`, yielded once /healthcheck answers."""
    port = free_port()
    args = [sys.executable, "-m", "celery", "-A", "inference_tasks", "flower", *flower_args, f"--port={port}"]
    with answering_flower(args, port, REPO_ROOT, clean_env(REDIS_URL=redis_url, **env)) as flower:
        yield flower, port


@contextlib.contextmanager
def answering_flower(command: list[str], port: int, cwd: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A Flower started by `command` (listening on `port`), yielded once /healthcheck answers; stopped after."""
    with served_process(command, cwd, env) as (flower, output):

        def answers() -> bool:
            if flower.poll() is not None:
                raise RuntimeError(f"flower exited: {output()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2):
                    return True
            except OSError:
                return False

        wait_until(answers, 60, "flower to answer /healthcheck")
        yield flower


@contextlib.contextmanager
def served_process(
    command: list[str], cwd: Path, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen, Callable[[], str]]]:
    """A long-running program with its output in a file, yielded with a reader of that output; stopped
    after (SIGTERM, then SIGKILL past 20 s). Its output goes to a file, not a pipe: an unread pipe fills
    and blocks the program's next log line, and with it its SIGTERM handler (the likely cause of Flower
    ignoring SIGTERM for 20 s on a loaded host)."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

        def output() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")

        try:
            yield process, output
        except BaseException:
            stop(process, output, command, quietly=True)  # the test's own failure is the one to report
            raise
        stop(process, output, command, quietly=False)


def stop(process: subprocess.Popen, output: Callable[[], str], command: list[str], quietly: bool) -> None:
    """SIGTERM, then SIGKILL past 20 s; unless `quietly`, a program that ignored SIGTERM fails the test."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        if not quietly:
            raise AssertionError(f"{command[-3:]} ignored SIGTERM for 20 s: {output()[-2000:]}") from None

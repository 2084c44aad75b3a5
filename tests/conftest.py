"""Fixtures: a real redis-server per test session, real `celery worker` processes, producer apps.

Why not celery.contrib.pytest's celery_worker or celery_session_worker: they run the worker inside
the test process with the solo or threads pool (and would run this package's worker hooks inside
pytest), so they cannot show what this project is about (prefork children, their native threads,
a child dying). Workers here are the real command an operator runs (started by
tests.support.localstack, which the benchmarks share). pytest-celery's `celery_setup` runs over
these same processes (tests/support/celery_nodes.py); its Docker fixtures are never requested.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from inference_tasks.routing import INFERENCE_QUEUE, TRAINING_QUEUE
from tests.support import celery_nodes, localstack, schedule, tiers, worker_scopes
from tests.support.local import start_redis
from tests.support.localstack import (
    REDIS_DATABASES,
    RedisServer,
    TlsFiles,
    WorkerProcess,
)
from tests.support.programs import long_tests_wanted


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the whole test session."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.process.terminate()
    server.process.wait(timeout=10)


def pytest_configure(config: pytest.Config) -> None:
    """OpenMP threads that find no work sleep instead of spinning, in this process and every process it
    starts (localstack.clean_env passes it on), before any test module loads torch: the suite runs two
    pytest processes on two cores, and a distillation beside another process took 80 s of CPU
    spinning and 40 s passive (docs/testing.md, "Speed"). A policy set in the shell is kept."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets its tier's marker (`unit`, `redis` or `worker`), `external` when it runs a program
    outside Python and Redis, and `slow` for either of those (docs/testing.md, "Groups"); a test whose
    tier is above its folder's stops the run. Tests marked `long` run only with INFERENCE_LONG_TESTS=1
    (docs/testing.md, "Long tests"): they keep the default suite, which CI runs, inside its 12 minutes
    on two cores. On two pytest processes the longest modules go first (tests/support/schedule.py)."""
    if wrong := [reason for item in items if (reason := tiers.misplaced(item))]:
        raise pytest.UsageError("tests in the wrong folder:\n" + "\n".join(wrong))
    for item in items:
        tier = tiers.tier_of(item)
        item.add_marker(tier)
        external = tiers.is_external(item)
        if external:
            item.add_marker(tiers.EXTERNAL)
        if external or tier == "worker":
            item.add_marker(tiers.SLOW)
    if schedule.running_in_parallel():
        items[:] = schedule.longest_first(items)
    if long_tests_wanted():
        return
    skip = pytest.mark.skip(reason="a long test: set INFERENCE_LONG_TESTS=1 to run it")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def test_tier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The running test's tier, and whether it is external, in the environment too: the helpers that
    start a redis-server or a worker refuse to in a test marked `unit`, and need_program refuses an
    external program to a test not marked `external` (tests/support/tiers.py)."""
    tier = next(name for name in tiers.TIERS if request.node.get_closest_marker(name))
    monkeypatch.setenv(tiers.TIER_VARIABLE, tier)
    monkeypatch.setenv(tiers.EXTERNAL_VARIABLE, "1" if request.node.get_closest_marker(tiers.EXTERNAL) else "0")
    return tier


_databases = itertools.count(1)


@pytest.fixture(scope="session")
def fresh_redis_url(redis_server: RedisServer) -> Callable[[], str]:
    """Builder: the URL of a Redis database no other test uses, so workers never steal tasks."""

    def build() -> str:
        db = next(_databases)
        assert db < REDIS_DATABASES, "raise REDIS_DATABASES"
        return redis_server.url(db)

    return build


# How long the workers still running at the end of the session get to stop, together, before SIGKILL.
SESSION_END_STOP_S = 10


@pytest.fixture(scope="session")
def start_worker(
    tmp_path_factory: pytest.TempPathFactory, fresh_redis_url: Callable[[], str]
) -> Iterator[Callable[..., WorkerProcess]]:
    """Builder: start a real `celery -A inference_tasks worker` with INFERENCE_* settings as keyword
    arguments (e.g. concurrency=2, pin_threads="false") and wait until it is ready. The worker ends with
    the test or module that started it (tests/support/worker_scopes.py), or with the session where
    `for_session=True`; what still runs at the session's end is stopped then.
    """
    names = itertools.count(1)

    def start(*, redis_url: str | None = None, for_session: bool = False, **options: object) -> WorkerProcess:
        name = f"test{next(names)}"
        log_dir = tmp_path_factory.mktemp("workers")
        worker = localstack.start_worker(name, redis_url or fresh_redis_url(), log_dir, os.environ, **options)
        return worker_scopes.started(worker, for_session)

    yield start
    started = worker_scopes.STARTED
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    # One deadline for all, short: a worker whose Redis a module already stopped sleeps in Celery's
    # reconnect loop and may not end on TERM (waiting the full stop timeout for each such worker in
    # turn once cost this teardown 155 s; one shared 30 s deadline still 30 s). An idle worker's warm
    # shutdown takes 1-3 s; the tests of shutdown itself stop their workers on their own.
    deadline = time.monotonic() + SESSION_END_STOP_S
    for worker in started:
        worker.stop(timeout=max(1.0, deadline - time.monotonic()))


@pytest.fixture(scope="module", autouse=True)
def workers_end_with_their_module() -> Iterator[None]:
    position = worker_scopes.mark()
    yield
    worker_scopes.end_started_since(position)


@pytest.fixture(autouse=True)
def workers_end_with_their_test() -> Iterator[None]:
    position = worker_scopes.mark()
    yield
    worker_scopes.end_started_since(position)


@pytest.fixture(scope="session")
def inference_worker(start_worker: Callable[..., WorkerProcess]) -> WorkerProcess:
    """The shipped inference profile: prefork, 2 children, pinned, the real default model."""
    return start_worker(concurrency=2, for_session=True)


@pytest.fixture(scope="session")
def trainer_worker(start_worker: Callable[..., WorkerProcess], inference_worker: WorkerProcess) -> WorkerProcess:
    """The trainer profile on the inference worker's Redis database: queue training, one child, 2 threads."""
    return start_worker(
        queues=TRAINING_QUEUE,
        concurrency=1,
        profile="trainer",
        trainer_threads=2,
        redis_url=inference_worker.redis_url,
        for_session=True,
    )


# pytest-celery: celery_setup over the session's redis-server and our own worker processes.
@pytest.fixture
def celery_broker_cluster(redis_server: RedisServer, inference_worker: WorkerProcess) -> object:
    return celery_nodes.broker_cluster(redis_server, inference_worker.redis_url)


@pytest.fixture
def celery_backend_cluster(redis_server: RedisServer, inference_worker: WorkerProcess) -> object:
    return celery_nodes.backend_cluster(redis_server, inference_worker.redis_url)


@pytest.fixture
def celery_worker_cluster(inference_worker: WorkerProcess, trainer_worker: WorkerProcess) -> object:
    return celery_nodes.worker_cluster((inference_worker, INFERENCE_QUEUE), (trainer_worker, TRAINING_QUEUE))


@pytest.fixture
def celery_setup_app(inference_worker: WorkerProcess) -> object:
    return inference_worker.app


@pytest.fixture(scope="session")
def installed_gem(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """deploy/rails built with `gem build` and installed into a private GEM_HOME; the environment
    (GEM_PATH) under which `require "inference_tasks"` loads that installed gem."""
    from tests.support.ruby_runner import build_gem, install_gem

    workdir = tmp_path_factory.mktemp("gem")
    return install_gem(build_gem(workdir), workdir / "gem-home")


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> TlsFiles:
    """A throwaway CA and a server certificate for 127.0.0.1, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed (apt-get install openssl)")
    where = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=inference-tasks-test-ca")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    (where / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip
    return TlsFiles(cert=where / "server.crt", key=where / "server.key", ca=where / "ca.crt")

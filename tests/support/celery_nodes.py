"""pytest-celery's `celery_setup` over this project's own processes: no Docker, the real worker command.

pytest-celery 1.3 builds its setup from clusters of nodes, each wrapping a Docker container; this
machine (and CI) has no Docker engine, so its default fixtures (`celery_worker`, `celery_*_broker`,
`celery_*_backend`) would fail and are never requested. Its nodes only read a few things from their
"container", so the objects here stand in for containers around what the tests already start: the
session's redis-server (broker and result backend) and real `celery -A inference_tasks worker`
processes (localstack.WorkerProcess). What a node reads, and so what each adapter offers:
`name`, `id`, `ready()`, `logs()`, `celeryconfig` (broker/backend URL), and for workers
`version()`, `log_level()`, `worker_name()`, `worker_queue()`. None of this is pytest-celery's
documented API, hence the exact pin in pyproject.toml (docs/upstream.md).
"""

from __future__ import annotations

import socket

import celery
import redis
from pytest_celery import (
    CeleryBackendCluster,
    CeleryBrokerCluster,
    CeleryTestBackend,
    CeleryTestBroker,
    CeleryTestWorker,
    CeleryWorkerCluster,
)

from tests.support.localstack import RedisServer, WorkerProcess


class LocalRedis:
    """A redis-server process, seen by pytest-celery as a broker or backend container."""

    def __init__(self, server: RedisServer, url: str) -> None:
        self.server = server
        self.name = f"redis-{server.port}"
        self.id = self.name
        self.celeryconfig = {"url": url, "host_url": url}

    def ready(self) -> bool:
        if self.server.process.poll() is not None:
            return False
        return bool(redis.Redis.from_url(self.celeryconfig["url"]).ping())

    def logs(self) -> str:
        path = self.server.log_path
        return path.read_text(errors="replace") if path and path.exists() else ""


class LocalWorker:
    """A `celery worker` process of ours, seen by pytest-celery as a worker container."""

    def __init__(self, worker: WorkerProcess, queue: str) -> None:
        self.worker = worker
        self.queue = queue
        self.name = worker.name
        self.id = worker.name
        self.celeryconfig = {"url": worker.redis_url, "host_url": worker.redis_url}

    def ready(self) -> bool:
        return self.worker.process.poll() is None and " ready." in self.worker.log()

    def logs(self) -> str:
        return self.worker.log()

    def version(self) -> str:
        return celery.__version__

    def log_level(self) -> str:
        return "INFO"

    def worker_name(self) -> str:
        return self.worker.name

    def worker_queue(self) -> str:
        return self.queue


class LocalWorkerNode(CeleryTestWorker):
    """A worker node whose hostname is the Celery node name the process really has (name@host)."""

    def hostname(self) -> str:
        return f"{self.container.worker_name()}@{socket.gethostname()}"


def broker_cluster(server: RedisServer, url: str) -> CeleryBrokerCluster:
    return CeleryBrokerCluster(CeleryTestBroker(LocalRedis(server, url)))  # type: ignore[arg-type]


def backend_cluster(server: RedisServer, url: str) -> CeleryBackendCluster:
    return CeleryBackendCluster(CeleryTestBackend(LocalRedis(server, url)))  # type: ignore[arg-type]


def worker_cluster(*workers: tuple[WorkerProcess, str]) -> CeleryWorkerCluster:
    """One node per (worker process, the queue it consumes)."""
    return CeleryWorkerCluster(*(LocalWorkerNode(LocalWorker(w, q), w.app) for w, q in workers))  # type: ignore[arg-type]

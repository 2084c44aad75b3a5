"""The stack the chaos soak runs: a Sentinel-managed Redis (primary, two replicas, three sentinels),
inference workers on simulated hosts (network namespaces, so a host can be partitioned) and a trainer
on this host; each worker can be killed, stopped and started again.

Redis and the sentinels run in this process's namespace, which gets an address on the simulated
network (Network.attach_here), so the workers' hosts reach them there and the benchmark's own
producers reach them on loopback. Without root (no namespaces) every worker runs on loopback and the
partition fault is left out of the schedule (the report says so).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import redis

from tests.support.localstack import REPO_ROOT, clean_env, start_replica, worker_command
from tests.support.netns import Host, Network
from tests.support.sentinel import SentinelCluster, node_bind, start_sentinel_cluster

# Short leases: a task held by a killed or cut-off worker comes back within seconds.
VISIBILITY_TIMEOUT_S = 6
LEASE_RENEW_INTERVAL_S = 2
READY_TIMEOUT_S = 180
STOP_TIMEOUT_S = 60
RESTART_PAUSE_S = 2.0
_LOG_LINE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/[\w-]+\] Task [\w.]+\[([0-9a-f-]+)\] (received|succeeded)"
)


def root_networking() -> bool:
    """Whether simulated hosts can be built here (root, iproute2, unshare)."""
    import shutil

    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("unshare") is not None


@dataclass
class FleetWorker:
    """One `celery worker` (inference or trainer) on a simulated host or on loopback."""

    name: str
    env: dict[str, str]
    log_path: Path
    queues: str
    host: Host | None = None
    process: subprocess.Popen | None = None
    starts: int = 0
    refused_starts: int = 0  # exits before "ready." (wait_ready starts it again)

    def start(self) -> None:
        args = worker_command(self.name, self.queues, "prefork")
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        if self.host is not None:
            self.process = self.host.popen(args, self.env, self.log_path, cwd=REPO_ROOT)
        else:
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    args, env=self.env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
        self.starts += 1

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until this start logged "ready."; a worker that exits first is started again after
        RESTART_PAUSE_S, as its supervisor would (deploy/systemd: Restart=always): a worker cannot
        start while Redis is over maxmemory (kombu's queue declaration and bindings are refused), and
        each such exit is counted in `refused_starts`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log()[self._offset :]:
                return
            if self.process is not None and self.process.poll() is not None:
                self.refused_starts += 1
                time.sleep(RESTART_PAUSE_S)
                self.start()
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become ready:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def child_pids(self) -> list[int]:
        if not self.alive():
            return []
        assert self.process is not None
        try:
            return [child.pid for child in psutil.Process(self.process.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """SIGKILL the whole worker (its process group: the main process and its children)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> int | None:
        """Warm shutdown (SIGTERM), SIGKILL if it hangs; the exit code."""
        if not self.alive():
            return self.process.returncode if self.process is not None else None
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def task_lines(self) -> list[tuple[float, str, str]]:
        """(time, task id, "received" | "succeeded") for every task line of its log, all starts."""
        lines = []
        for line in self.log().splitlines():
            if match := _LOG_LINE.match(line):
                at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                lines.append((at, match.group(2), match.group(3)))
        return lines

    def successes(self) -> Counter[str]:
        return Counter(task_id for _, task_id, what in self.task_lines() if what == "succeeded")


@dataclass
class Fleet:
    """Everything the soak started; `close` stops it all, in an order that leaves nothing behind."""

    workdir: Path
    cluster: SentinelCluster
    announce: str
    network: Network | None
    workers: list[FleetWorker] = field(default_factory=list)
    trainer: FleetWorker | None = None

    @property
    def url(self) -> str:
        """REDIS_URL on loopback: for the benchmark's own producers, collector and Ruby producer."""
        return self.cluster.url(0)

    @property
    def master(self) -> str:
        return self.cluster.master_name

    def primary_client(self) -> redis.Redis:
        """A client on the current primary (asks the sentinels every time it is built)."""
        from redis.sentinel import Sentinel

        sentinels = Sentinel([("127.0.0.1", port) for port, _ in self.cluster.sentinels], socket_timeout=1.0)
        return sentinels.master_for(self.master, socket_timeout=5.0)

    def primary_port(self) -> int | None:
        return self.cluster.master_port()

    def restart_node(self, port: int, primary_port: int) -> None:
        """Start a killed Redis node again, on its own port, as a replica of the current primary (the
        sentinels would demote it anyway; starting it as a replica avoids a moment as an empty primary)."""
        nodes = [self.cluster.primary, self.cluster.replica, *self.cluster.more_replicas]
        dead = next(node for node in nodes if node.port == port)
        primary = next(node for node in nodes if node.port == primary_port)
        workdir = Path(dead.log_path).parent if dead.log_path else self.workdir / f"node-{port}"
        replacement = start_replica(
            primary, workdir, wait_in_sync=False, extra_args=node_bind(self.announce), port=port
        )
        for attribute in ("primary", "replica"):
            if getattr(self.cluster, attribute) is dead:
                setattr(self.cluster, attribute, replacement)
        self.cluster.more_replicas = [replacement if node is dead else node for node in self.cluster.more_replicas]

    def close(self) -> None:
        """Every worker, then Redis, then the simulated network; each step whatever the last one did."""
        for worker in [*self.workers, *([self.trainer] if self.trainer else [])]:
            try:
                if worker.alive():
                    worker.stop()
            except Exception:  # noqa: BLE001 - stopping the rest matters more
                worker.kill()
        try:
            self.cluster.stop()
        finally:
            if self.network is not None:
                self.network.close()


def start_fleet(workdir: Path, hosts: int = 2, with_trainer: bool = True, simulated: bool = True) -> Fleet:
    """The cluster, `hosts` inference workers (one child each: this machine has two cores) and a trainer."""
    network = None
    announce = "127.0.0.1"
    if simulated:
        network = Network().__enter__()
        announce = network.attach_here()
    try:
        cluster = start_sentinel_cluster(workdir / "redis", replicas=2, announce=announce)
    except BaseException:
        if network is not None:
            network.close()
        raise
    fleet = Fleet(workdir, cluster, announce, network)
    try:
        common: dict[str, Any] = {
            "INFERENCE_REDIS_SENTINEL_MASTER": cluster.master_name,
            "INFERENCE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S),
            "INFERENCE_LEASE_RENEW_INTERVAL_S": str(LEASE_RENEW_INTERVAL_S),
            "INFERENCE_CONCURRENCY": "1",
        }
        for index in range(1, hosts + 1):
            name = f"w{index}"
            host = network.add_host(name) if network is not None else None
            env = clean_env(os.environ, REDIS_URL=cluster.url(0, host=announce), **common)
            fleet.workers.append(FleetWorker(name, env, workdir / f"{name}.log", "inference", host))
        if with_trainer:
            trainer = {"INFERENCE_PROFILE": "trainer", "INFERENCE_TRAINER_THREADS": "1"}
            env = clean_env(os.environ, REDIS_URL=cluster.url(0), **trainer, **common)
            fleet.trainer = FleetWorker("trainer", env, workdir / "trainer.log", "training")
        everyone = [*fleet.workers, *([fleet.trainer] if fleet.trainer else [])]
        for worker in everyone:
            worker.start()
        for worker in everyone:
            worker.wait_ready()
    except BaseException:
        fleet.close()
        raise
    return fleet

"""A Redis primary, a replica and three sentinels on loopback: the smallest real Sentinel deployment,
for the failover test and benchmark (benchmarks/failover.py).

The sentinels judge the primary down after `down_after_ms` without an answer and need a quorum of
two to fail over; each runs from its own config file (Sentinel rewrites it as it learns).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.localstack import (
    MissingProgram,
    RedisServer,
    TlsFiles,
    free_port,
    start_redis,
    start_replica,
    tls_client_options,
)
from tests.support.waiting import poll_until

MASTER_NAME = "inference-primary"
START_TIMEOUT_S = 30


@dataclass
class SentinelCluster:
    master_name: str
    primary: RedisServer
    replica: RedisServer
    sentinels: list[tuple[int, subprocess.Popen]] = field(default_factory=list)
    # Replicas beyond the first (start_sentinel_cluster(replicas=N)): after a failover the promoted
    # primary still has a replica, which durable pushes (WAIT) need.
    more_replicas: list[RedisServer] = field(default_factory=list)
    # Set: every node and sentinel listens on TLS only (start_sentinel_cluster(tls=...)).
    tls: TlsFiles | None = None

    def url(self, db: int = 0, host: str = "127.0.0.1") -> str:
        """REDIS_URL for workers and producers: every sentinel, `;`-separated (kombu's and Celery's form);
        `host`: the address to reach them at (one they bind: start_sentinel_cluster(bind=...))."""
        return ";".join(f"sentinel://{host}:{port}" for port, _ in self.sentinels) + f"/{db}"

    def sentinel_client(self, index: int = 0) -> redis.Redis:
        return redis.Redis(
            port=self.sentinels[index][0], socket_timeout=2, decode_responses=True, **tls_client_options(self.tls)
        )

    def master_port(self) -> int | None:
        """The primary's port as the first sentinel that answers sees it."""
        for port, _ in self.sentinels:
            try:
                client = redis.Redis(port=port, socket_timeout=1, **tls_client_options(self.tls))
                address = client.sentinel_get_master_addr_by_name(self.master_name)
            except redis.RedisError:
                continue
            if address:
                return int(address[1])
        return None

    def kill_primary(self) -> float:
        """kill -9 the primary (no shutdown, no save): returns when it was killed (time.time())."""
        self.primary.process.send_signal(signal.SIGKILL)
        killed = time.time()
        self.primary.process.wait(timeout=10)
        return killed

    def stop(self) -> None:
        for _, process in self.sentinels:
            if process.poll() is None:
                process.terminate()
        servers = [self.primary, self.replica, *self.more_replicas]
        for server in servers:
            if server.process.poll() is None:
                server.process.terminate()
        for process in [p for _, p in self.sentinels] + [server.process for server in servers]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def start_sentinel_cluster(
    workdir: Path,
    down_after_ms: int = 1000,
    failover_timeout_ms: int = 5000,
    replicas: int = 1,
    tls: TlsFiles | None = None,
    announce: str = "127.0.0.1",
) -> SentinelCluster:
    """Primary, `replicas` replicas (replicating, in sync) and three sentinels that all know them and
    each other. With `tls`, every one of them listens on TLS only, and replicates, monitors and
    fails over over TLS (`tls-replication yes`). With `announce` (an address of this host other than
    loopback, e.g. on a simulated network), every one of them also listens there, and the sentinels
    name the primary and replicas by it, so hosts elsewhere can follow them."""
    bind = node_bind(announce)
    binary = shutil.which("redis-server")
    if binary is None:
        raise MissingProgram("redis-server is not installed (apt-get install redis-server)")
    over_tls = ("--tls-replication", "yes") if tls else ()
    primary = start_redis(workdir / "primary", tls=tls, extra_args=(*bind, *over_tls))
    primary.host = announce
    replica = start_replica(primary, workdir / "replica", wait_in_sync=False, tls=tls, extra_args=bind)
    cluster = SentinelCluster(MASTER_NAME, primary, replica, tls=tls)
    for index in range(1, replicas):
        cluster.more_replicas.append(
            start_replica(primary, workdir / f"replica{index}", wait_in_sync=False, tls=tls, extra_args=bind)
        )
    try:
        for index in range(3):
            port = free_port()
            directory = workdir / f"sentinel{index}"
            directory.mkdir(parents=True, exist_ok=True)
            config = directory / "sentinel.conf"
            listen = f"port {port}\n"
            if tls:
                listen = (
                    f"port 0\ntls-port {port}\ntls-cert-file {tls.cert}\ntls-key-file {tls.key}\n"
                    f"tls-ca-cert-file {tls.ca}\ntls-auth-clients no\ntls-replication yes\n"
                )
            addresses = " ".join(dict.fromkeys(("127.0.0.1", announce)))
            config.write_text(
                f"{listen}bind {addresses}\nprotected-mode no\ndir {directory}\n"
                f"logfile {directory / 'sentinel.log'}\nsentinel monitor {MASTER_NAME} {announce} {primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n"
                f"sentinel failover-timeout {MASTER_NAME} {failover_timeout_ms}\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
            cluster.sentinels.append((port, subprocess.Popen([binary, str(config), "--sentinel"])))
        _wait_until_ready(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def node_bind(announce: str) -> tuple[str, ...]:
    """redis-server options to listen on loopback and on `announce` too (none for loopback alone), and,
    as a replica, to be named by `announce` whatever address it replicates from: a node restarted as a
    replica of a primary it reached over loopback was otherwise listed as 127.0.0.1, the sentinels
    promoted it by that address, which no other host can reach, and flapped for ten minutes (the
    fourth 20-minute chaos run)."""
    if announce == "127.0.0.1":
        return ()
    return ("--bind", "127.0.0.1", announce, "--protected-mode", "no", "--replica-announce-ip", announce)


def _wait_until_ready(cluster: SentinelCluster) -> None:
    """Every replica in sync with the primary, and every sentinel seeing every replica and two peers."""
    options = tls_client_options(cluster.tls)
    servers = (cluster.replica, *cluster.more_replicas)
    replicas = [redis.Redis(port=server.port, socket_timeout=2, **options) for server in servers]

    def ready() -> bool:
        try:
            synced = all(replica.info("replication").get("master_link_status") == "up" for replica in replicas)
            views = []
            for port, _ in cluster.sentinels:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                client = redis.Redis(port=port, socket_timeout=1, **options)
                views.append(
                    (
                        len(client.sentinel_slaves(cluster.master_name)),
                        len(client.sentinel_sentinels(cluster.master_name)),
                    )
                )
            return synced and all(seen >= len(replicas) and peers >= 2 for seen, peers in views)
        except (OSError, redis.RedisError):
            return False

    if poll_until(ready, START_TIMEOUT_S, poll_s=0.1):
        return
    raise RuntimeError("the Sentinel deployment did not come up (see the sentinel*.log files)")

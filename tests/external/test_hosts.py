"""Many hosts: Redis, a client and worker hosts, each in its own network namespace with its own hostname
(tests/support/netns.py). Both worker hosts serve and are judged separately; a host cut off mid-load
(a partition, not a stop) has its tasks finished by the other within the lease timeout, nothing lost;
a third host joining under load takes a share without restarts. Needs root and iproute2 (CI has both).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

import pytest

from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT, SUCCEEDED, worker_command
from tests.support.netns import Network, namespaces_left
from tests.support.programs import missing, need_program
from tests.support.waiting import poll_until, wait_until

pytestmark = pytest.mark.worker

VISIBILITY_TIMEOUT_S = 6
LEASE_RENEW_INTERVAL_S = 2
PASSWORD = "simulated-hosts"


def need_root_networking() -> None:
    need_program("ip", "iproute2")
    need_program("unshare", "util-linux")
    if os.geteuid() != 0:
        missing("simulated hosts need root (network namespaces)")


class HostWorker:
    def __init__(self, net, host, redis_url: str, log_dir) -> None:
        self.host = host
        self.log_path = log_dir / f"{host.name}.log"
        env = clean_env(
            REDIS_URL=redis_url,
            INFERENCE_CONCURRENCY="1",
            INFERENCE_VISIBILITY_TIMEOUT_S=str(VISIBILITY_TIMEOUT_S),
            INFERENCE_LEASE_RENEW_INTERVAL_S=str(LEASE_RENEW_INTERVAL_S),
        )
        self.process = host.popen(worker_command(host.name, "inference", "prefork"), env, self.log_path, cwd=REPO_ROOT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def succeeded(self) -> Counter[str]:
        return Counter(SUCCEEDED.findall(self.log()))

    def wait_ready(self) -> None:
        wait_until(lambda: " ready." in self.log() or self.process.poll() is not None, 180, f"{self.host.name} ready")
        assert self.process.poll() is None, self.log()[-3000:]


def client(net_host, redis_url: str, *args: str) -> dict:
    out = net_host.run(
        [sys.executable, "-m", "tests.support.netns_client", *args],
        clean_env(REDIS_URL=redis_url),
        timeout=240,
        cwd=REPO_ROOT,
    )
    return json.loads(out.strip().splitlines()[-1])


# Long: the chaos soak's quick run (tests/worker/test_chaos.py) covers this fault in the default suite.
@pytest.mark.long
@pytest.mark.timeout(600)
def test_hosts_serve_fail_over_on_a_partition_and_join_under_load(tmp_path):
    need_root_networking()
    workers: list[HostWorker] = []
    with Network() as net:
        try:
            redis_host = net.add_host("redis")
            client_host = net.add_host("client")
            hosts = [net.add_host(name) for name in ("w1", "w2", "w3")]
            server = redis_host.popen(
                # Off loopback Redis refuses clients without a password (protected mode): give it one.
                ["redis-server", "--bind", redis_host.address, "--port", "6379", "--save", "", "--appendonly", "no",
                 "--requirepass", PASSWORD, "--dir", str(tmp_path)],
                os.environ,
                tmp_path / "redis.log",
            )  # fmt: skip
            url = f"redis://:{PASSWORD}@{redis_host.address}:6379/0"
            workers = [HostWorker(net, host, url, tmp_path) for host in hosts[:2]]
            for worker in workers:
                worker.wait_ready()

            # Both hosts serve, and doctor and the exporter judge each host on its own.
            batch = client(client_host, url, "send", "24", "8")
            done = client(client_host, url, "wait", *batch["ids"])
            assert done["missing"] == [] and {v["status"] for v in done["final"].values()} == {"SUCCESS"}
            assert all(sum(worker.succeeded().values()) > 0 for worker in workers)
            view = client(client_host, url, "hosts")
            assert set(view["doctor"]) == {"w1", "w2"}, view
            assert {host: verdict["verdict"] for host, verdict in view["doctor"].items()} == {"w1": "OK", "w2": "OK"}
            assert {host: gauges["inference_host_oversubscribed"] for host, gauges in view["exporter"].items()} == {
                "w1": 0,
                "w2": 0,
            }

            # A partition: w2's link goes down while it holds tasks; w1 finishes them after the lease.
            w1, w2 = workers
            before = {worker.host.name: len(worker.log()) for worker in workers}
            load = client(client_host, url, "send", "16", "64")
            partition_ids = load["ids"]
            wait_until(lambda: "received" in w2.log()[before["w2"] :], 60, "w2 to take a task")
            net.cut(w2.host)
            cut_at = time.time()
            held_by_w2 = [i for i in load["ids"] if f"[{i}] received" in w2.log()[before["w2"] :]]
            done = client(client_host, url, "wait", *load["ids"])
            finished_after_cut = max(
                time.mktime(time.strptime(v["date_done"][:19], "%Y-%m-%dT%H:%M:%S")) for v in done["final"].values()
            )
            assert done["missing"] == [], f"lost: {done['missing']}"
            assert {v["status"] for v in done["final"].values()} == {"SUCCESS"}
            taken_over = [i for i in held_by_w2 if w1.succeeded()[i]]
            assert taken_over, "w1 finished none of the tasks the partitioned host held"
            net.heal(w2.host)
            runs = w1.succeeded() + w2.succeeded()
            twice = [i for i in load["ids"] if runs[i] > 1]
            print(
                f"\n[hosts] partition: {len(held_by_w2)} task(s) held by the cut host, {len(taken_over)} finished by "
                f"the other host; every task done {finished_after_cut - cut_at:.1f} s after the cut "
                f"(lease {VISIBILITY_TIMEOUT_S} s + renewal {LEASE_RENEW_INTERVAL_S} s); 0 lost; "
                f"run twice so far: {len(twice)}"
            )
            assert all(i in held_by_w2 for i in twice), "only tasks the cut host held may run twice"

            # A third host joins under load and takes a share, with no restart of the others.
            pids = [worker.process.pid for worker in workers]
            workers.append(HostWorker(net, hosts[2], url, tmp_path))
            sent: list[str] = []

            def third_host_has_served_some() -> bool:  # keeps the queue busy meanwhile
                sent.extend(client(client_host, url, "send", "12", "32")["ids"])
                return sum(workers[2].succeeded()[i] for i in sent) >= 3

            poll_until(third_host_has_served_some, 240, poll_s=0)  # asserted below, with the shares
            done = client(client_host, url, "wait", *sent)
            assert done["missing"] == []
            shares = {worker.host.name: sum(worker.succeeded()[i] for i in sent) for worker in workers}
            print(f"[hosts] join under load: {len(sent)} tasks, served per host {shares}")
            assert shares["w3"] >= 3, shares
            assert [worker.process.pid for worker in workers[:2]] == pids
            assert all(worker.process.poll() is None for worker in workers)
            # Counted once the healed host has been serving again for a while: did it finish what it held?
            runs = sum((worker.succeeded() for worker in workers), Counter())
            twice = [i for i in partition_ids if runs[i] > 1]
            print(f"[hosts] after the heal: {len(twice)} of the {len(held_by_w2)} held task(s) ran a second time")
            assert all(i in held_by_w2 for i in twice), "only tasks the cut host held may run twice"
            server.terminate()
        finally:
            for worker in workers:
                if worker.process.poll() is None:
                    os.killpg(worker.process.pid, 15)
            for worker in workers:
                try:
                    worker.process.wait(timeout=30)
                except Exception:  # noqa: BLE001 - a worker that will not stop is killed
                    os.killpg(worker.process.pid, 9)
    assert not [name for name in namespaces_left() if name.startswith(net.prefix)]

"""Simulated hosts on one machine: Linux network namespaces joined by a bridge, each with its own
address and (for the processes started in it) its own hostname. Needs root and iproute2.

    with Network() as net:
        redis_host = net.add_host("redis")        # 10.231.0.1
        worker = net.add_host("w1")               # 10.231.0.2
        process = worker.popen([...], env)        # runs inside w1, `hostname` says w1
        net.cut(worker)                           # a partition: w1's link goes down, nothing is stopped
        net.heal(worker)

Addresses exist only inside namespaces created here (the bridge lives in a namespace of its own);
everything is deleted on exit, on failure too, and namespaces left by a killed earlier run with the
same prefix are deleted first.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "itest"
SUBNET = "10.231.0"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    bridge_port: str  # the veth end in the switch namespace: down = partitioned

    def command(self, args: Sequence[str]) -> list[str]:
        """`args` run inside this host's network namespace, under a UTS namespace named after it."""
        script = f'hostname {self.name} && exec "$@"'
        return ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "sh", "-c", script, "sh", *args]

    def popen(
        self, args: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None
    ) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(
                self.command(args), env=dict(env), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def run(self, args: Sequence[str], env: Mapping[str, str], timeout: float = 120, cwd: Path | None = None) -> str:
        done = subprocess.run(
            self.command(args), env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} on {self.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout


@dataclass
class Network:
    # The owning process's pid: a later run deletes what a dead run left, never a live run's hosts.
    prefix: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    hosts: list[Host] = field(default_factory=list)
    _numbers: itertools.count = field(default_factory=lambda: itertools.count(1))
    _here: str = ""  # the veth end attach_here put in this process's namespace

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    def __enter__(self) -> Network:
        if shutil.which("ip") is None or shutil.which("unshare") is None:
            raise RuntimeError("simulated hosts need iproute2 (ip) and util-linux (unshare)")
        remove_stale_namespaces()
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            _ip("-n", self.switch, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def add_host(self, name: str) -> Host:
        number = next(self._numbers)
        namespace = f"{self.prefix}-{name}"
        inside, outside = f"{self.prefix}h{number}", f"{self.prefix}s{number}"
        address = f"{SUBNET}.{number}"
        _ip("netns", "add", namespace)
        host = Host(name, namespace, address, outside)
        self.hosts.append(host)
        _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("link", "set", outside, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", outside, "master", "br0")
        _ip("-n", self.switch, "link", "set", outside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "link", "set", inside, "name", "eth0")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        return host

    def attach_here(self, number: int = 254) -> str:
        """Give the namespace this process runs in an address on the switch (SUBNET.number): what it
        runs (Redis, sentinels, producers) is then reachable from every host, and reaches them. The
        link goes with the switch's namespace on close."""
        inside, outside = f"{self.prefix}r0", f"{self.prefix}r1"
        address = f"{SUBNET}.{number}"
        _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
        self._here = inside
        _ip("link", "set", outside, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", outside, "master", "br0")
        _ip("-n", self.switch, "link", "set", outside, "up")
        _ip("addr", "add", f"{address}/24", "dev", inside)
        _ip("link", "set", inside, "up")
        return address

    def cut(self, host: Host) -> None:
        """Partition `host`: its link to the switch goes down; its processes keep running."""
        _ip("-n", self.switch, "link", "set", host.bridge_port, "down")

    def heal(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.bridge_port, "up")

    def close(self) -> None:
        """Delete every namespace made here (their veth ends go with them), and this namespace's link."""
        if self._here:
            subprocess.run(["ip", "link", "delete", self._here], capture_output=True)
            self._here = ""
        for namespace in [host.namespace for host in self.hosts] + [self.switch]:
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
        self.hosts.clear()

    def __exit__(self, *_: object) -> None:
        self.close()


def remove_stale_namespaces() -> None:
    """Namespaces with our prefix whose run (the pid in the prefix) died before cleaning up, and the
    link such a run gave its own namespace (attach_here)."""
    for name in namespaces_left():
        owner = name.removeprefix(PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        owner = name.removeprefix(PREFIX).removesuffix("r0")
        if name.startswith(PREFIX) and name.endswith("r0") and owner.isdigit() and not Path(f"/proc/{owner}").exists():
            subprocess.run(["ip", "link", "delete", name], capture_output=True)


def namespaces_left(prefix: str = PREFIX) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(prefix)]

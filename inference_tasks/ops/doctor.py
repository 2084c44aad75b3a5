"""`inference-tasks doctor`: is Redis safe to queue on, does the model load, is any host oversubscribed?

The incident behind this project was 240 native threads on 24 cores, found with `ps` during an
outage. The doctor asks every live worker's main process for its children (control.py) and
adds up, per host, the native compute threads every child runs: more than the host's cores is
OVERSUBSCRIBED, with the setting that fixes it. Each check is a pure function of what was
read, so the verdicts are tested without a fleet; `run_doctor` does the reading.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from inference_tasks.config import Settings
from inference_tasks.config.defaults import ENV_PREFIX
from inference_tasks.ops.cache_report import cache_findings
from inference_tasks.ops.precision_report import precision_finding
from inference_tasks.ops.runtime_labels import device_label, runtime_label, runtime_name
from inference_tasks.ops.runtime_report import runtime_finding

OK = "OK"
PROBLEM = "PROBLEM"
OVERSUBSCRIBED = "OVERSUBSCRIBED"
# How long to wait for children that are still starting to record their threads.
STARTING_CHILD_WAIT_S = 30.0


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, what was found, and how to fix it if wrong."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass
class HostVerdict:
    """Every worker on one host, its children's threads added up against the host's cores."""

    host: str
    cores: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    @property
    def compute_threads(self) -> int:
        return sum(row["compute_threads_total"] for row in self.rows)

    @property
    def os_threads(self) -> int:
        return sum(row["os_threads_total"] for row in self.rows)

    @property
    def verdict(self) -> str:
        return OVERSUBSCRIBED if self.compute_threads > self.cores else OK


def redis_checks(
    ping_ok: bool,
    error: str,
    info: dict[str, Any],
    config: dict[str, str] | None,
    label: str = "redis",
    variable: str = "REDIS_URL",
    holds: str = "queued and unacknowledged task",
) -> list[Check]:
    """Reachability, persistence (AOF) and eviction policy of one Redis: the one that holds the queues
    (label "redis"), or results' own (label "result redis", INFERENCE_RESULT_REDIS_URL)."""
    if not ping_ok:
        return [Check(label, False, f"unreachable: {error}", f"start Redis or fix {variable}")]
    checks = [Check(label, True, f"reachable, version {info.get('redis_version', '?')}")]
    if int(info.get("aof_enabled", 0)) == 1:
        checks.append(Check(f"{label} persistence", True, f"AOF on (every {holds} survives a restart)"))
    else:
        checks.append(
            Check(
                f"{label} persistence",
                False,
                f"AOF off: a Redis restart loses every {holds}",
                "appendonly yes, appendfsync everysec",
            )
        )
    if config is None:
        checks.append(
            Check(f"{label} eviction", True, "CONFIG is disabled on this server; check maxmemory-policy yourself")
        )
    else:
        policy = config.get("maxmemory-policy", "?")
        evicts = policy != "noeviction" and int(config.get("maxmemory", "0") or 0) > 0
        checks.append(
            Check(
                f"{label} eviction",
                not evicts,
                f"maxmemory-policy {policy}, maxmemory {config.get('maxmemory', '?')}",
                "maxmemory-policy noeviction (an evicted key is lost work)" if evicts else "",
            )
        )
    return checks


def host_verdicts(replies: dict[str, dict[str, Any]]) -> list[HostVerdict]:
    """Group the workers' replies (nodename -> control.describe_worker) by host and judge each host."""
    hosts: dict[str, HostVerdict] = {}
    for node, report in sorted(replies.items()):
        host = hosts.setdefault(report["host"], HostVerdict(report["host"], report["cores"]))
        host.cores = min(host.cores, report["cores"])
        children = report["children"]
        per_child = [child["compute_threads"] for child in children]
        host.rows.append(
            {
                "worker": node,
                "model": report.get("alias") or "?",
                "profile": report["profile"],
                "children": len(children),
                "threads_per_child": per_child,
                "os_threads_per_child": [child["os_threads"] for child in children],
                "compute_threads_total": sum(per_child),
                "devices": [device_label(child) for child in children],
                "runtime": runtime_label(report),
                "mps_active": bool(report.get("mps_active")),
                "main_cuda_initialized": bool(report["main"].get("cuda_initialized")),
                "os_threads_total": sum(child["os_threads"] for child in children) + report["main"]["os_threads"],
            }
        )
    for host in hosts.values():
        if host.verdict == OVERSUBSCRIBED:
            host.fixes = _fixes(host, replies)
    return list(hosts.values())


def _fixes(host: HostVerdict, replies: dict[str, dict[str, Any]]) -> list[str]:
    fixes = []
    for row in host.rows:
        report = replies[row["worker"]]
        if report["profile"] == "inference" and max(row["threads_per_child"], default=1) > 1:
            fixes.append(
                f"{row['worker']}: its {row['children']} children run up to {max(row['threads_per_child'])} native "
                f"threads each; set {ENV_PREFIX}PIN_THREADS=true (one thread per child)"
            )
    fixes.append(
        f"keep the sum over this host's workers of children x threads per child at or below {host.cores} "
        f"(now {host.compute_threads}): lower {ENV_PREFIX}CONCURRENCY or {ENV_PREFIX}TRAINER_THREADS"
    )
    return fixes


def _starting_children(replies: dict[str, dict[str, Any]]) -> list[str]:
    """Children that have not yet recorded their threads (still loading or warming up)."""
    return [
        f"{node} slot {child['slot']}"
        for node, report in replies.items()
        for child in report["children"]
        if child["compute_threads"] == 0
    ]


def worker_check(replies: dict[str, dict[str, Any]], verdicts: list[HostVerdict]) -> Check:
    if not replies:
        return Check("workers", False, "no worker answered", "start one: inference-tasks worker")
    starting = _starting_children(replies)
    if starting:
        return Check("workers", False, f"children still starting: {', '.join(starting)}", "run the doctor again")
    cuda_parents = [row["worker"] for host in verdicts for row in host.rows if row["main_cuda_initialized"]]
    if cuda_parents:
        return Check(
            "cuda",
            False,
            f"the main process of {', '.join(cuda_parents)} initialised CUDA: children forked from it cannot use it",
            "never run CUDA work in the worker's main process (INFERENCE_PRELOAD_MODEL keeps its copy on the CPU)",
        )
    bad = [host.host for host in verdicts if host.verdict != OK]
    if bad:
        return Check("thread budget", False, f"oversubscribed: {', '.join(bad)}", "see the fixes under each host")
    return Check("thread budget", True, f"{len(replies)} worker(s) on {len(verdicts)} host(s) within their cores")


def check_model(settings: Settings) -> Check:
    """Load the configured model here, offline, and encode one sentence (seconds: imports torch)."""
    import os

    from inference_tasks.worker.host import threads

    threads.set_offline_env(os.environ)
    started = time.perf_counter()
    try:
        from inference_tasks.worker.runtimes.load_options import LoadOptions
        from inference_tasks.worker.runtimes.registry import load_dense_encoder

        # The served model's files on its runtime, asked for one sentence's vector.
        encoder = load_dense_encoder(settings.served_model.source, "cpu", LoadOptions.of(settings))
        dim = len(encoder.encode(["doctor"], normalize=True)[0])
    except Exception as error:  # noqa: BLE001 - any failure to load is the finding
        fix = f"fix {ENV_PREFIX}MODEL or {ENV_PREFIX}MODELS_FILE"
        if settings.model_backend in ("openvino", "ctranslate2"):
            fix += f" or run `inference-tasks export-model --backend {settings.model_backend}` (and install its extra)"
        return Check("model", False, f"{settings.model or 'the default model'} failed to load: {error}", fix)
    runtime = f"{runtime_name(encoder.backend, getattr(encoder, 'engine', None))} {encoder.precision}"
    if choice := getattr(encoder, "runtime_choice", None):
        runtime = f"auto: {choice['served']}" + (f" ({choice['why']})" if choice["how"] == "fallback" else "")
    took = time.perf_counter() - started
    return Check("model", True, f"{encoder.name} loads on {runtime} ({dim} dims, {took:.1f} s here)")


def ask_workers(app: Any, timeout: float) -> dict[str, dict[str, Any]]:
    """One broadcast; every live worker's main process answers within `timeout` seconds."""
    from inference_tasks.worker.lifecycle.control import COMMAND

    replies = app.control.broadcast(COMMAND, reply=True, timeout=timeout) or []
    merged: dict[str, dict[str, Any]] = {}
    for reply in replies:
        for node, report in reply.items():
            if isinstance(report, dict) and "children" in report:
                merged[node] = report
    return merged


def read_redis(client: Any) -> tuple[bool, str, dict[str, Any], dict[str, str] | None]:
    try:
        client.ping()
        info = client.info()
    except Exception as error:  # noqa: BLE001 - unreachable for whatever reason is the finding
        return False, str(error), {}, None
    try:
        config = client.config_get("maxmemory*")
    except Exception:  # noqa: BLE001 - CONFIG renamed or forbidden (managed Redis)
        config = None
    return True, "", info, config


def render(checks: list[Check], verdicts: list[HostVerdict], console: Any) -> None:
    """The checks, then one table per host, then the host's verdict and fixes."""
    from rich.table import Table

    for check in checks:
        mark = "[green]OK[/green]" if check.ok else "[red]PROBLEM[/red]"
        console.print(
            f"{mark:>24}  {check.name}: {check.detail}" + (f"\n{'':>10}fix: {check.fix}" if check.fix else "")
        )
    for host in verdicts:
        table = Table(title=f"{host.host}: {host.cores} cores")
        columns = (
            "worker", "model", "profile", "children", "threads per child", "OS threads per child",
            "compute threads", "runtime", "devices", "MPS",
        )  # fmt: skip
        for column in columns:
            table.add_column(column)
        for row in host.rows:
            table.add_row(
                row["worker"],
                row["model"],
                str(row["profile"]),
                str(row["children"]),
                ", ".join(map(str, row["threads_per_child"])),
                ", ".join(map(str, row["os_threads_per_child"])),
                str(row["compute_threads_total"]),
                row["runtime"],
                ", ".join(row["devices"]),
                "active" if row["mps_active"] else "-",
            )
        console.print(table)
        colour = "green" if host.verdict == OK else "red"
        console.print(
            f"[{colour}]{host.verdict}[/{colour}] {host.host}: {host.compute_threads} compute threads on "
            f"{host.cores} cores ({host.os_threads} OS threads in all)"
        )
        for fix in host.fixes:
            console.print(f"  fix: {fix}")


def run_doctor(app: Any, console: Any, check_the_model: bool = True, timeout: float = 2.0) -> int:
    """Every check, printed; the exit code: 0 when all are OK, 1 otherwise."""
    from inference_tasks.redis_access.connections import broker_redis, cache_redis, result_redis

    checks = redis_checks(*read_redis(broker_redis(app.settings)))
    broker_ok = checks[0].ok
    if app.settings.results_apart:
        variable = f"{ENV_PREFIX}RESULT_REDIS_URL"
        checks += redis_checks(*read_redis(result_redis(app.settings)), "result redis", variable, "stored result")
    if app.settings.cache_url:
        checks += [Check(*found) for found in cache_findings(*read_redis(cache_redis(app.settings)))]
    if check_the_model:
        checks.append(check_model(app.settings))
    replies = ask_workers(app, timeout) if broker_ok else {}
    deadline = time.monotonic() + STARTING_CHILD_WAIT_S
    while _starting_children(replies) and time.monotonic() < deadline:  # a child records its threads once warm
        time.sleep(0.5)
        replies = ask_workers(app, timeout)
    verdicts = host_verdicts(replies)
    checks.append(worker_check(replies, verdicts))
    if found := precision_finding(replies):
        checks.append(Check("openvino precision", *found))
    if found := runtime_finding(replies):
        checks.append(Check("auto runtime", *found))
    render(checks, verdicts, console)
    return 0 if all(check.ok for check in checks) else 1

"""`inference-tasks probe --live|--ready`: an exec probe for Kubernetes and systemd, local to the host.

Reads the state each worker's main process rewrites every second (worker/lifecycle/probe_state.py) in
INFERENCE_PROBE_DIR; never broadcasts, never imports the model. Live: every worker found there has
rewritten its state within `max_age_s` (its event loop turns), or is reconnecting to Redis within
its grace. Ready: live, the model loaded and at least one child warmed up, and Redis answers a PING
from this host with the worker's own URL and user. State files of processes that no longer exist
are ignored (a worker killed without its shutdown leaves one).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# A main process silent this long is not alive: several missed beats (one a second).
DEFAULT_MAX_AGE_S = 10.0


def running_states(probe_dir: Path, node: str | None = None) -> list[dict[str, Any]]:
    """The states of live processes in `probe_dir` (only `node`'s when given)."""
    states = []
    for path in sorted(probe_dir.glob("*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # replaced or removed while read
        if node is not None and state.get("node") != node:
            continue
        try:
            os.kill(int(state["pid"]), 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass  # alive, another user's
        states.append(state)
    return states


def liveness(states: list[dict[str, Any]], max_age_s: float, now: float) -> tuple[bool, str]:
    """Whether every worker's main process still turns its event loop, and what was seen."""
    if not states:
        return False, "no worker state here: not started yet, stopped, or another INFERENCE_PROBE_DIR"
    for state in states:
        age = now - state["beat"]
        if age > max_age_s and now > state.get("quiet_until", 0):
            return False, f"{state['node']} (pid {state['pid']}): main process silent for {age:.1f} s"
    return True, ", ".join(f"{state['node']} beat {now - state['beat']:.1f} s ago" for state in states)


def readiness(states: list[dict[str, Any]], max_age_s: float, now: float, redis_ping: Any) -> tuple[bool, str]:
    """Live, every worker's model loaded with a child warm, and Redis answering `redis_ping()`."""
    live, said = liveness(states, max_age_s, now)
    if not live:
        return False, said
    for state in states:
        if not state["ready"]:
            return False, f"{state['node']}: not ready: {state['reason']}"
    try:
        redis_ping()
    except Exception as error:  # noqa: BLE001 - any failure to reach Redis is the finding
        return False, f"Redis does not answer: {type(error).__name__}: {error}"
    warm = ", ".join(
        f"{state['node']} ({state['children_warm']}/{state['children']} children warm)" for state in states
    )
    return True, f"ready: {warm}; Redis answers"


def probe(
    settings: Settings, ready: bool, node: str | None = None, max_age_s: float = DEFAULT_MAX_AGE_S
) -> tuple[bool, str]:
    """The probe's verdict and its one line, for INFERENCE_PROBE_DIR of `settings`."""
    states = running_states(settings.probe_dir_path, node)
    if not ready:
        return liveness(states, max_age_s, time.time())
    return readiness(states, max_age_s, time.time(), lambda: _ping(settings))


def _ping(settings: Settings) -> None:
    from inference_tasks.redis_access.connections import uncached_broker_redis

    client = uncached_broker_redis(settings)
    client.connection_pool.connection_kwargs.update(socket_connect_timeout=1.0, socket_timeout=1.0)
    try:
        client.ping()
    finally:
        client.close()


@click.command("probe")
@click.option("--live", "check", flag_value="live", help="Alive: every worker's main process turns its event loop.")
@click.option("--ready", "check", flag_value="ready", help="Ready: alive, model loaded, a child warm, Redis answers.")
@click.option("--node", default=None, help="Only this worker node (e.g. inference@host); default: every one here.")
@click.option("--max-age", default=DEFAULT_MAX_AGE_S, show_default=True, help="Seconds of silence that mean not alive.")
@click.option("--wait", default=0.0, show_default=True, help="Ask again every second for up to this many seconds.")
def probe_command(check: str | None, node: str | None, max_age: float, wait: float) -> None:
    """Exec probe for Kubernetes and systemd: exit 0 when the workers on this host are alive (--live) or
    ready (--ready), 1 otherwise, with one line saying why. Local and fast: no broadcast, no model."""
    from inference_tasks.config import load_settings

    if check is None:
        raise click.UsageError("say --live or --ready")
    settings = load_settings(os.environ)
    deadline = time.monotonic() + wait
    ok, said = probe(settings, check == "ready", node, max_age)
    while not ok and time.monotonic() < deadline:
        time.sleep(1.0)
        ok, said = probe(settings, check == "ready", node, max_age)
    click.echo(f"{'OK' if ok else 'FAIL'} {check}: {said}")
    sys.exit(0 if ok else 1)

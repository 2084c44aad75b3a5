"""Every worker a test starts ends with what started it: the test, its module, or (the shared inference
and trainer workers) the session.

`start_worker` is one session-wide builder, so before this each worker lived until the session ended:
by the last modules some forty idle workers (each a main process and its children, with their timers,
heartbeats and Redis waits) shared the host's two cores, and a test that takes 7 s alone took 40 s
there. The conftest's autouse fixtures take a mark when a module and a test begin and, when they end,
kill the workers started since (the whole process group at once: a test's worker is not reused, and
warm shutdown has its own tests), except those kept for the session.
"""

from __future__ import annotations

import contextlib
import os
import signal

from tests.support.localstack import WorkerProcess

STARTED: list[WorkerProcess] = []
KEPT_FOR_SESSION: set[int] = set()


def started(worker: WorkerProcess, for_session: bool) -> WorkerProcess:
    STARTED.append(worker)
    if for_session:
        KEPT_FOR_SESSION.add(id(worker))
    return worker


def mark() -> int:
    return len(STARTED)


def end_started_since(position: int) -> None:
    """Kill the workers started since `position` that still run, except those kept for the session."""
    for worker in STARTED[position:]:
        if id(worker) in KEPT_FOR_SESSION or worker.process.poll() is not None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=10)

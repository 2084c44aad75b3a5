"""The one worker context: built fresh at worker start, one child check, empty outside a worker."""

from __future__ import annotations

import os

from inference_tasks.worker.lifecycle import context


def test_start_builds_a_fresh_context_that_current_returns() -> None:
    """worker_init's start() replaces whatever the process held; current() returns that one."""
    before = context.current()
    before.process.tasks_served = 7
    started = context.start()
    assert context.current() is started is not before
    assert started.process.tasks_served == 0 and started.budget is None and started.slots.table is None


def test_a_process_that_never_started_as_a_worker_has_an_empty_context() -> None:
    """No model: a task run there fails saying the process has not loaded one."""
    ctx = context.start()
    assert ctx.model.served is None
    try:
        ctx.model.get()
    except RuntimeError as error:
        assert "has not loaded a model" in str(error)
    else:
        raise AssertionError("an empty context handed out a model")


def test_the_child_check_tells_the_main_process_a_child_and_a_non_worker_apart() -> None:
    """in_prefork_child: False before worker_init recorded a main pid, False in the main process,
    True in any other process (a forked child inherits the main pid)."""
    ctx = context.start()
    assert not ctx.in_prefork_child()
    ctx.process.main_pid = os.getpid()
    assert not ctx.in_prefork_child()
    ctx.process.main_pid = os.getpid() + 1  # as a child sees its parent's pid
    assert ctx.in_prefork_child()

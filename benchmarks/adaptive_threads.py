"""Experiment (benchmark only): an adaptive thread budget for pinned prefork children.

Loaded into a worker with `--include benchmarks.adaptive_threads`. Imported in the worker's main
process before it forks, so the lock and the counter below are shared by every child. A child
starting a task takes every core no sibling is using (at least one) and gives them back after:
alone it runs with all cores (the low-load latency of default threading); under load every
child falls back to one thread. The one unavoidable overshoot: a sibling that starts while a
child holds all cores still takes its one thread, so the pool briefly runs cores + 1 threads.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from celery.signals import task_postrun, task_prerun

from inference_tasks.config import available_cores

CORES = available_cores()
_lock = multiprocessing.Lock()
_threads_in_use = multiprocessing.RawValue("i", 0)
_mine = [0]


@task_prerun.connect
def take_idle_cores(**_: Any) -> None:
    import torch

    with _lock:
        _mine[0] = max(1, CORES - _threads_in_use.value)
        _threads_in_use.value += _mine[0]
    torch.set_num_threads(_mine[0])


@task_postrun.connect
def give_cores_back(**_: Any) -> None:
    with _lock:
        _threads_in_use.value -= _mine[0]

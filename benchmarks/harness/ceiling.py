"""The physical limit, for the benchmark: N processes x 1 thread calling encode directly, no transport.

Kept apart from serving.py because a spawned pool process imports the module of its initializer:
this one is small, and sets the thread variables before torch loads.
"""

from __future__ import annotations

import os
from pathlib import Path

_model = None


def start(
    model_name: str,
    pinned_threads: int,
    backend: str = "torch",
    cache: str | None = None,
    cpus: frozenset[int] | None = None,
    precision: str = "auto",
) -> None:
    """Pool initializer: confine to `cpus` if given, pin every native pool, then load (compile, for
    OpenVINO) and warm up the model."""
    global _model
    if cpus:
        os.sched_setaffinity(0, cpus)
    from inference_tasks.worker.host import threads

    threads.set_thread_env(os.environ, pinned_threads)
    threads.set_offline_env(os.environ)
    import torch  # noqa: F401

    from inference_tasks.config.catalogue import ModelEntry
    from inference_tasks.config.defaults import DEFAULT_MICROBATCH_MAX_TOKENS
    from inference_tasks.worker.kinds.model_holder import ModelHolder
    from inference_tasks.worker.runtimes.load_options import LoadOptions

    threads.limit_loaded_pools(pinned_threads)
    holder = ModelHolder()
    options = LoadOptions(backend, Path(cache) if cache else None, precision)
    holder.load(ModelEntry("ceiling", source=model_name), "cpu", options=options)
    if holder.served is not None:  # passes bounded by tokens, as a worker's children run them
        holder.served.max_pass_tokens = DEFAULT_MICROBATCH_MAX_TOKENS
    if backend == "openvino" and holder.served is not None:
        holder.served.compile(pinned_threads)
    holder.warm_up()
    _model = holder.get()


def encode(texts: list[str]) -> int:
    """Embed one batch; return only its row count (the ceiling pays for no result transport)."""
    return len(_model.encode(texts, normalize=True))


def pid() -> int:
    return os.getpid()

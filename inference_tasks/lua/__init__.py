"""The Redis Lua scripts this package runs, one .lua file each, read once per process.

Each file opens with the keys and arguments it takes, so the Redis layout the scripts assume is read
in one place (inference_tasks/redis_access/keys.py names the keys): take.lua (broker/fetch.py),
ring.lua (broker/wakeup.py),
renew_leases.lua (broker/leases.py), set_unless_succeeded.lua (broker/result_backend.py),
save_head.lua (ml/store.py), push_unless_full.lua (gateway/dispatch.py),
read_finished_result.lua (gateway/results.py).
"""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def script(name: str) -> str:
    """The source of `<name>.lua`, as EVAL takes it."""
    return (resources.files(__name__) / f"{name}.lua").read_text(encoding="utf-8")

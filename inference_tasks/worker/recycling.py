"""Stagger child recycling: each prefork child gets its own task limit, so they never all restart at once.

Celery gives every child the same worker_max_tasks_per_child. Children that start together and
share the load evenly then reach the limit together and all restart in the same second: the
pool serves nothing meanwhile (the failure mode of pools restarting every worker at once). A
random limit per child, drawn again by each replacement, keeps recycles spread out for good.
"""

from __future__ import annotations

import logging
import random
import sys
from types import FrameType

logger = logging.getLogger(__name__)


def jittered_limit(limit: int | None, jitter: float, rng: random.Random) -> int | None:
    """A child's task limit: `limit` minus a random share of up to `jitter` of it, at least 1.

    Never above `limit`, so the configured value stays the bound an operator can rely on.
    `None` (unlimited) stays unlimited.
    """
    if not limit:
        return None
    spread = round(limit * jitter)
    return max(1, limit - rng.randint(0, spread))


def set_this_childs_task_limit(limit: int | None) -> bool:
    """Give the billiard pool worker running this process `limit` tasks before it recycles.

    Called from worker_process_init, which billiard's Worker runs (after_fork) before its work
    loop reads `maxtasks`; billiard offers no other hook, so find that Worker on the stack.
    Returns False (and the child keeps Celery's limit) if it is not there.
    """
    from billiard.pool import Worker

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Worker):
            candidate.maxtasks = limit
            return True
        frame = frame.f_back
    logger.warning("billiard pool worker not found on the stack: this child keeps Celery's task limit")
    return False

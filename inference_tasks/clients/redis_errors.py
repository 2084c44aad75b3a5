"""Recognise Redis refusing writes because it is full (maxmemory reached with `noeviction`).

Redis then answers every command that could grow memory (SET, LPUSH, HSET, ZADD, ...) with
`OOM command not allowed when used memory > 'maxmemory'`, inside MULTI as EXECABORT; reads and
deletes (GET, DEL, ZREM, HDEL, RPOP) still work. Producers, the result backend and the transport
each react differently (refuse, retry, keep the message), so they share only this test.
"""

from __future__ import annotations

import redis
from kombu.exceptions import OperationalError

OOM_MARKERS = ("OOM ", "maxmemory")


def is_out_of_memory(error: BaseException | None) -> bool:
    """True when `error`, or an error it was raised from, is Redis saying it is at maxmemory.

    kombu re-raises some Redis errors as its own OperationalError (a producer's publish), so the
    chain is followed; a plain ResponseError counts when its text carries Redis' OOM wording.
    """
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, redis.exceptions.OutOfMemoryError):
            return True
        if isinstance(error, redis.exceptions.ResponseError | OperationalError) and any(
            marker in str(error) for marker in OOM_MARKERS
        ):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False

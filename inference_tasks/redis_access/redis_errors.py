"""Recognise Redis refusing writes because it is full (maxmemory reached with `noeviction`), and
Redis refusing an ACL user a command, key or channel.

Redis then answers every command that could grow memory (SET, LPUSH, HSET, ZADD, ...) with
`OOM command not allowed when used memory > 'maxmemory'`, inside MULTI as EXECABORT; reads and
deletes (GET, DEL, ZREM, HDEL, RPOP) still work. Producers, the result backend and the transport
each react differently (refuse, retry, keep the message), so they share only this test.
"""

from __future__ import annotations

from urllib.parse import urlsplit

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


def permission_error_in(error: BaseException | None) -> redis.exceptions.NoPermissionError | None:
    """The NOPERM reply in `error`'s chain (kombu may wrap it), or None."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, redis.exceptions.NoPermissionError):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def redis_user(url: str) -> str:
    """The ACL user a Redis URL authenticates as (`default` without one); for a sentinel:// URL, the
    first part's, as kombu reads it."""
    return urlsplit(url.split(";", 1)[0]).username or "default"


def missing_grant_message(refused: redis.exceptions.NoPermissionError, url: str, role: str) -> str:
    """What an operator needs when Redis refuses this process' user: who, what Redis said (the command
    and key where it names them), and where the grants come from."""
    return (
        f"Redis refused user {redis_user(url)!r} ({refused}). The {role}'s user needs the grants "
        f"`inference-tasks acl` prints for role {role} (load the new file after an upgrade: "
        "`ACL LOAD`); `ACL LOG` on the Redis names the refused key or channel"
    )

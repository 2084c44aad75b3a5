"""kombu's exchange binding tables in the form stock Celery clients read, with our priority list names.

kombu's Redis transport uses one `sep` for two things: the members of its binding tables
(`_kombu.binding.<exchange>`, "routing key<sep>pattern<sep>queue") and the names of a queue's priority
lists ("<queue><sep><step>"). Until this module the project set `sep` to ":" so that producers in
other languages push to lists named "inference:3"; but a stock client (`celery --broker=... inspect
ping`, Flower's official image, Prometheus exporters) writes its reply binding with kombu's default
separator, and a worker reading that table with ":" raised ValueError for every control message: no
reply, a traceback in the log.

Now kombu's default separator is used for the tables (readable by every kombu client), and the
priority lists keep their names through `_q_for_pri` (redis_access/keys.py names them for every
reader). A table member written by a fleet from before this change (":"-separated) is still read, and
a worker binding a queue removes the old form of its own binding, so the tables become stock-readable
as the fleet is upgraded (docs/operations.md, "Upgrading"). A member in neither form is skipped with
one log line, once per member and channel: a control reply that cannot be routed costs a line, never
a traceback. Pinned to kombu 5.7 (docs/upstream.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str

from inference_tasks.redis_access.keys import priority_list_key
from inference_tasks.routing import PRIORITY_SEPARATOR

logger = logging.getLogger(__name__)

# kombu's own separator (its Redis Channel's default), the one stock clients write and read.
KOMBU_SEPARATOR: str = kombu_redis.Channel.sep
# The separator this project's fleets wrote binding members with before (the priority separator).
LEGACY_SEPARATOR = PRIORITY_SEPARATOR


def parse_member(member: str) -> tuple[str, str, str] | None:
    """(routing key, pattern, queue) of a binding member in kombu's form or the legacy ":" form; None
    for anything else. The legacy form splits at the first two colons (a queue name may hold more)."""
    parts = member.split(KOMBU_SEPARATOR) if KOMBU_SEPARATOR in member else member.split(LEGACY_SEPARATOR, 2)
    if len(parts) != 3:
        return None
    return parts[0], parts[1], parts[2]


class StockBindings(kombu_redis.Channel):
    """kombu's Redis channel with the places its `sep` decides a name made ours; our screening
    channel (broker/transport.py) builds on it."""

    # Members already reported as unreadable, so a bad member costs one line per channel.
    reported_members: frozenset[str] = frozenset()

    def _q_for_pri(self, queue: str, pri: int) -> str:
        """The list holding `queue`'s messages of priority `pri`: "inference:3" whatever kombu's `sep`
        (every kombu path that names a priority list comes here: push, size, purge, delete, restore)."""
        return priority_list_key(queue, self.priority(pri))

    def get_table(self, exchange: str) -> list[tuple[str, str, str]]:
        """kombu's binding table of `exchange`, each member read in either form (`parse_member`)."""
        key = self.keyprefix_queue % exchange
        with self.conn_or_acquire() as client:
            values = client.smembers(key)
        return list(self.readable_members(key, values))

    def readable_members(self, key: str, values: Iterable[Any]) -> Iterable[tuple[str, str, str]]:
        for value in values:
            member = bytes_to_str(value)
            parsed = parse_member(member)
            if parsed is not None:
                yield parsed
            elif member not in self.reported_members:
                self.reported_members = self.reported_members | {member}
                logger.warning(
                    "binding table %s holds %r, which is not 'routing key, pattern, queue' in kombu's form "
                    "or ours: ignored (whatever it routed to gets nothing)", key, member,
                )  # fmt: skip

    def queue_bind(
        self, queue: str, exchange: str | None = None, routing_key: str = "", arguments: Any = None, **kwargs: Any
    ) -> None:
        """kombu's bind (writing its own form), then the same binding's legacy ":" member removed."""
        super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)
        exchange = exchange or "amq.direct"  # as kombu's bind defaults it
        key, pattern, bound = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
        legacy = LEGACY_SEPARATOR.join([key or "", pattern or "", bound or ""])
        with self.conn_or_acquire() as client, client.pipeline() as pipe:
            pipe.srem(self.keyprefix_queue % (exchange,), legacy)
            pipe.srem(self.keyprefix_binding_permanent % (exchange,), legacy)
            pipe.execute()

"""Why kombu's URL failover is off for every connection of the app (Celery's broker_failover_strategy).

kombu treats a `;`-separated broker URL as alternates and, on a connection error, switches to the
next one (kombu's Connection.switch). That re-parses the URL's scheme into kombu's own transport,
dropping the one the app names (`broker_transport`): after a Sentinel failover a worker consumed
through kombu's plain SentinelTransport, without screening, the atomic take or the full-Redis
handling (the chaos soak caught a worker stopping with "Unrecoverable error" on kombu's QoS at
maxmemory), and producers' pooled channels were closed under them (AttributeError from kombu).
Switching buys nothing here: a sentinel:// URL's parts are the sentinels, and each connection
already asks all of them for the current primary (kombu's SentinelChannel reads them from the
alternates); a redis:// URL has one part.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class NeverSwitch(Iterator[Any]):
    """A failover strategy with nowhere to go: kombu consumes one entry when it builds the cycle and
    switches only while the cycle is truthy, so it never switches."""

    def __init__(self, alternates: list[Any]) -> None:
        self.alternates = alternates

    def __next__(self) -> Any:
        return self.alternates[0] if self.alternates else None

    def __bool__(self) -> bool:
        return False


class NeverSwitchStrategy(str):
    """What the app gives Celery's broker_failover_strategy: a callable building NeverSwitch that is
    also a string, because kombu reports the strategy it was given in the connection's info, which a
    worker sends back as JSON (inspect stats: a class there failed to encode, and Flower saw no
    worker)."""

    def __call__(self, alternates: list[Any]) -> NeverSwitch:
        return NeverSwitch(alternates)

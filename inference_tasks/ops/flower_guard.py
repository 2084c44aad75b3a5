"""Flower run through our app: loopback by default, basic auth from settings, never open without auth.

Flower parses its own options (tornado's) after `celery -A inference_tasks` has loaded our app, so
the check is a tornado parse callback, registered only in a process that is running Flower.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from typing import Any

from inference_tasks.config import Settings

logger = logging.getLogger(__name__)

LOOPBACK_ADDRESS = "127.0.0.1"


class FlowerExposed(SystemExit):
    """Flower would listen beyond this host without authentication."""


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and names that resolve only to them; '' and 0.0.0.0 are every interface."""
    if address in ("", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        pass
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(address, None)}
    except OSError:
        return False
    return bool(resolved) and all(ipaddress.ip_address(str(ip).split("%")[0]).is_loopback for ip in resolved)


def secure_flower_options(options: Any, settings: Settings) -> None:
    """Apply our defaults to Flower's parsed options, or stop if it would be exposed unauthenticated."""
    if not options.address:
        options.address = LOOPBACK_ADDRESS  # Flower's own default, '', is every interface
    if settings.flower_basic_auth and not options.basic_auth:
        options.basic_auth = [settings.flower_basic_auth]
    if options.basic_auth or options.auth or is_loopback(options.address):
        return
    raise FlowerExposed(
        f"refusing to start Flower on {options.address}:{options.port} without authentication: "
        "set INFERENCE_FLOWER_BASIC_AUTH=user:password (or pass --basic-auth / --auth), "
        f"or bind it to {LOOPBACK_ADDRESS}. Note: /metrics and /healthcheck stay unauthenticated."
    )


def guard_flower(settings_source: Any) -> None:
    """In a process running Flower, check its options once they are parsed; elsewhere do nothing.

    `settings_source` is the app: its settings are read only when Flower's options are parsed.
    """
    if "flower.command" not in sys.modules:
        return
    from tornado.options import options

    options.add_parse_callback(lambda: secure_flower_options(options, settings_source.settings))

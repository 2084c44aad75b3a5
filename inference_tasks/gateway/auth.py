"""Bearer keys (INFERENCE_GATEWAY_API_KEYS), compared in constant time; and where running without them is allowed."""

from __future__ import annotations

import hmac
import ipaddress

from inference_tasks.gateway.errors import ApiError


def check_bearer(header: str | None, keys: tuple[str, ...]) -> None:
    """ApiError 401 unless `header` is "Bearer <one of keys>"; nothing to check when `keys` is empty."""
    if not keys:
        return
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(401, "no API key: send Authorization: Bearer <key>", code="invalid_api_key")
    presented = given.strip().encode()
    if not any(hmac.compare_digest(presented, key.encode()) for key in keys):
        raise ApiError(401, "incorrect API key provided", code="invalid_api_key")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or "localhost") binds to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_problem(keys: tuple[str, ...], no_auth: bool, host: str) -> str | None:
    """Why the gateway must not start with these keys on `host`, or None."""
    if no_auth and not is_loopback(host):
        return f"--no-auth serves a loopback address only (127.0.0.1, ::1, localhost), not {host!r}"
    if not keys and not no_auth:
        return "no API keys: set INFERENCE_GATEWAY_API_KEYS (comma-separated), or --no-auth on a loopback address"
    return None

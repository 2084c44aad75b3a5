"""Bearer keys: which tenant a request is (config/tenants.py), and where running without keys is allowed.

A presented key is hashed once (sha256) and looked up among the tenants' key digests: the lookup's timing
depends on a digest the caller cannot steer, not on how much of a key it guessed, and no key is kept."""

from __future__ import annotations

import ipaddress

from inference_tasks.config.tenants import DEFAULT_TENANT, Tenant, Tenants
from inference_tasks.gateway.errors import ApiError


def anonymous() -> Tenant:
    """Who a request is when the gateway runs without keys (--no-auth, loopback only), or on a route that
    takes none: the unlimited tenant `default`."""
    return Tenant(DEFAULT_TENANT)


def check_bearer(header: str | None, tenants: Tenants) -> Tenant:
    """The tenant whose key `header` ("Bearer <key>") presents; ApiError 401 otherwise. No tenants: anyone."""
    if not tenants:
        return anonymous()
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(401, "no API key: send Authorization: Bearer <key>", code="invalid_api_key")
    tenant = tenants.find(given.strip())
    if tenant is None:
        raise ApiError(401, "incorrect API key provided", code="invalid_api_key")
    return tenant


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or "localhost") binds to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_problem(tenants: Tenants, no_auth: bool, host: str) -> str | None:
    """Why the gateway must not start with these tenants on `host`, or None."""
    if no_auth and not is_loopback(host):
        return f"--no-auth serves a loopback address only (127.0.0.1, ::1, localhost), not {host!r}"
    if not tenants and not no_auth:
        return (
            "no API keys: set INFERENCE_GATEWAY_API_KEYS (comma-separated) or INFERENCE_GATEWAY_TENANTS_FILE, "
            "or --no-auth on a loopback address"
        )
    return None

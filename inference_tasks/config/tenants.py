"""The gateway's tenants: who may call it, with which limits, read from INFERENCE_GATEWAY_TENANTS_FILE (TOML).

    [tenants.search]
    keys = ["sk-search-1"]                # or key_sha256 = ["<hex sha256 of the key>"]: the file holds no secret
    requests_per_minute = 600
    tokens_per_minute = 200000
    max_in_flight = 32
    models = ["minilm"]                   # the aliases it may use; absent: every model the gateway serves

Every limit is optional (absent: none). The comma-separated INFERENCE_GATEWAY_API_KEYS remain one tenant,
`default`, with no limits. A key is known by its sha256 only, here and after: a presented key is hashed
once and looked up, so neither logs nor metrics nor Redis ever hold a key, only tenant names. Every field
is checked at the gateway's start; a message names the file, the line and the field.
Producer-safe: stdlib only.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference_tasks.config.checks import ConfigError

# The tenant INFERENCE_GATEWAY_API_KEYS' keys belong to.
DEFAULT_TENANT = "default"
LIMITS = ("requests_per_minute", "tokens_per_minute", "max_in_flight")
FIELDS = ("keys", "key_sha256", "models", *LIMITS)
# The most any limit may say: a mistyped extra digit should not be taken for a plan.
MAX_LIMIT = 10**9
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Tenant:
    """One tenant: its name, the models it may use (None: every served one) and its limits (0: none)."""

    name: str
    models: tuple[str, ...] | None = None
    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    max_in_flight: int = 0

    @property
    def limited(self) -> bool:
        return any(getattr(self, limit) for limit in LIMITS)


@dataclass(frozen=True)
class Tenants:
    """Tenants by the sha256 of each of their keys."""

    by_key_digest: dict[str, Tenant] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_key_digest)

    @property
    def names(self) -> list[str]:
        return sorted({tenant.name for tenant in self.by_key_digest.values()})

    def find(self, key: str) -> Tenant | None:
        """The tenant holding `key`, or None."""
        return self.by_key_digest.get(key_digest(key))


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_tenants(path: str | Path | None, api_keys: tuple[str, ...]) -> Tenants:
    """The tenants of the file at `path` (None: none), plus `api_keys` as the unlimited tenant `default`."""
    by_digest: dict[str, Tenant] = {}
    if api_keys:
        default = Tenant(DEFAULT_TENANT)
        by_digest.update({key_digest(key): default for key in api_keys})
    if path is None:
        return Tenants(by_digest)
    where = f"INFERENCE_GATEWAY_TENANTS_FILE {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{where}: cannot be read ({getattr(error, 'strerror', None) or error})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: not valid TOML ({error})") from None
    unknown = sorted(set(document) - {"tenants"})
    if unknown:
        raise ConfigError(f"{where}: unknown top-level key(s) {unknown}; a tenant is a table [tenants.<name>]")
    tables = document.get("tenants", {})
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{where}: no tenants; write one table [tenants.<name>] per tenant")
    for name, table in tables.items():
        tenant, digests = parse_tenant(where, text, name, table)
        if name == DEFAULT_TENANT and api_keys:
            raise ConfigError(f"{where}{line_of(text, name)}: tenants.{name}: the name is taken by "
                              "INFERENCE_GATEWAY_API_KEYS' keys; choose another")  # fmt: skip
        for digest in digests:
            if digest in by_digest:
                raise ConfigError(f"{where}{line_of(text, name, 'keys')}: tenants.{name}: a key is also "
                                  f"{by_digest[digest].name!r}'s; each key names one tenant")  # fmt: skip
            by_digest[digest] = tenant
    return Tenants(by_digest)


def parse_tenant(where: str, text: str, name: Any, table: Any) -> tuple[Tenant, list[str]]:
    """One [tenants.<name>] table, every field checked; returns the tenant and its keys' digests."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: tenants.{name} must be a table [tenants.{name}]")
    at = f"{where}{line_of(text, name)}: tenants.{name}"
    if not NAME.match(name):
        raise ConfigError(f"{at}: a tenant's name is 1 to 64 letters, digits, '_', '.' or '-' (it names the "
                          "tenant in metrics and task headers)")  # fmt: skip

    def fail(field: str, message: str) -> ConfigError:
        return ConfigError(f"{where}{line_of(text, name, field)}: tenants.{name}.{field}: {message}")

    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise fail(unknown[0], f"unknown field; allowed: {', '.join(FIELDS)}")
    digests = [key_digest(key) for key in strings(table, "keys", fail)]
    for digest in strings(table, "key_sha256", fail):
        if not SHA256.match(digest):
            raise fail("key_sha256", f"{digest[:16]!r}... is not 64 lower-case hex digits (sha256sum of the key)")
        digests.append(digest)
    if not digests:
        raise fail("keys", "no key: give keys = [...] or key_sha256 = [...]")
    models = strings(table, "models", fail) if "models" in table else None
    if models is not None and not models:
        raise fail("models", "an empty list allows no model; leave it out to allow every served model")
    limits = {}
    for limit in (limit for limit in LIMITS if limit in table):
        value = table[limit]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_LIMIT:
            raise fail(limit, f"must be a whole number from 1 to {MAX_LIMIT}, got {value!r} (leave it out for none)")
        limits[limit] = value
    return Tenant(name, tuple(models) if models is not None else None, **limits), digests


def strings(table: dict[str, Any], field: str, fail: Any) -> list[str]:
    value = table.get(field, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise fail(field, "must be a list of non-blank strings")
    return [item.strip() for item in value]


def line_of(text: str, tenant: str, field: str | None = None) -> str:
    """ ", line N" of the tenant's table header, or of `field` within it; "" when it cannot be found."""
    header = re.compile(rf"^\s*\[\s*tenants\.(\"?){re.escape(str(tenant))}\1\s*\]")
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if header.match(line):
            if field is None:
                return f", line {number}"
            for offset, inner in enumerate(lines[number:], number + 1):
                if inner.lstrip().startswith("["):
                    break
                if re.match(rf"^\s*{re.escape(field)}\s*=", inner):
                    return f", line {offset}"
            return f", line {number}"
    return ""

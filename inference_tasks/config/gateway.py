"""The gateway's settings (`inference-tasks gateway`, inference_tasks/gateway/): read once from the
environment beside Settings, which holds everything the gateway shares with producers (Redis URLs,
TLS, the catalogue, the per-task limits). Only the gateway reads these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from inference_tasks.config.checks import ConfigError, parse_env_text

GATEWAY_PREFIX = "INFERENCE_GATEWAY_"
# Seconds a request waits for its task's result before 504: a 64-text embed takes well under a second
# on a served model, so this only bounds a fleet that is down or far behind.
DEFAULT_GATEWAY_TIMEOUT_S = 30.0
# A request body over this is refused (413) before it is parsed: 256 texts of 2,000 characters are ~0.6 MB.
DEFAULT_GATEWAY_MAX_BODY_BYTES = 4 * 1024 * 1024
# A model's queue (every priority list) holding this many waiting tasks or more refuses new ones (429 with
# Retry-After): beyond it a request would wait in Redis longer than a client waits for it.
DEFAULT_GATEWAY_MAX_QUEUE_DEPTH = 2000
# The Retry-After a 429 carries, in seconds.
DEFAULT_GATEWAY_RETRY_AFTER_S = 1
# /health asks the fleet (a broadcast) at most this often; probes in between get the last answer.
DEFAULT_GATEWAY_HEALTH_TTL_S = 5.0
# Seconds a request for a model no worker consumes waits for one (pushed, so a pool that scales on queue depth
# wakes); 0: refused at once (503 model_unavailable).
DEFAULT_GATEWAY_SCALE_WAIT_S = 0.0
# A tenant's requests in flight per queue priority step: its first this many go to the front (0), each this
# many more one step back, so one tenant's backlog never sits ahead of another's first request. 0: all at 0.
DEFAULT_GATEWAY_FAIR_SHARE = 4


@dataclass(frozen=True)
class GatewaySettings:
    """What the gateway adds to Settings: who may call it, and how long and how much it takes."""

    # Bearer keys, comma-separated; none: only `--no-auth` on a loopback address starts.
    api_keys: str | None = field(default=None, repr=False)
    # A TOML file of tenants, each with its keys, limits and models (config/tenants.py); the keys above
    # remain the unlimited tenant `default`.
    tenants_file: str | None = None
    # The catalogue aliases served, comma-separated (others are 404). None: every catalogue model.
    models: str | None = None
    # The served aliases /health waits for, comma-separated. None: the served default model alone, so one pool
    # scaled to zero or down does not take the others' traffic out of a load balancer.
    required_models: str | None = None
    timeout_s: float = DEFAULT_GATEWAY_TIMEOUT_S
    max_body_bytes: int = DEFAULT_GATEWAY_MAX_BODY_BYTES
    max_queue_depth: int = DEFAULT_GATEWAY_MAX_QUEUE_DEPTH
    retry_after_s: int = DEFAULT_GATEWAY_RETRY_AFTER_S
    health_ttl_s: float = DEFAULT_GATEWAY_HEALTH_TTL_S
    scale_wait_s: float = DEFAULT_GATEWAY_SCALE_WAIT_S
    fair_share: int = DEFAULT_GATEWAY_FAIR_SHARE

    def __post_init__(self) -> None:
        for name in ("timeout_s", "max_body_bytes", "max_queue_depth", "retry_after_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{GATEWAY_PREFIX}{name.upper()} must be above 0, got {getattr(self, name)!r}")
        for name in ("health_ttl_s", "scale_wait_s", "fair_share"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{GATEWAY_PREFIX}{name.upper()} must be 0 or more, got {getattr(self, name)!r}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The bearer keys, blanks dropped."""
        return tuple(key.strip() for key in (self.api_keys or "").split(",") if key.strip())

    @property
    def model_aliases(self) -> tuple[str, ...] | None:
        """INFERENCE_GATEWAY_MODELS as aliases; None: every catalogue model."""
        return _aliases(self.models)

    @property
    def required_aliases(self) -> tuple[str, ...] | None:
        """INFERENCE_GATEWAY_REQUIRED_MODELS as aliases; None: the served default model."""
        return _aliases(self.required_models)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GatewaySettings:
        """INFERENCE_GATEWAY_<FIELD> for each field; unset ones keep their defaults."""
        kinds = {"api_keys": str, "tenants_file": str, "models": str, "required_models": str, "timeout_s": float,
                 "max_body_bytes": int, "max_queue_depth": int, "retry_after_s": int, "health_ttl_s": float,
                 "scale_wait_s": float, "fair_share": int}  # fmt: skip
        values: dict[str, object] = {}
        for item in fields(cls):
            variable = GATEWAY_PREFIX + item.name.upper()
            raw = environ.get(variable)
            if raw:
                values[item.name] = parse_env_text(variable, raw, kinds[item.name])
        return cls(**values)  # type: ignore[arg-type]  # each value parsed to its field's type above


def _aliases(listed: str | None) -> tuple[str, ...] | None:
    aliases = tuple(alias.strip() for alias in (listed or "").split(",") if alias.strip())
    return aliases or None

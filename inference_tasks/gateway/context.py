"""What the gateway's routes share, made at start (the app's lifespan): settings, the catalogue, the tenants,
the dispatcher, the fleet's health and the tenants' limits. Routes only read it."""

from __future__ import annotations

from dataclasses import dataclass

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import Catalogue
from inference_tasks.config.gateway import GatewaySettings
from inference_tasks.config.tenants import Tenants
from inference_tasks.gateway.dispatch import Dispatcher
from inference_tasks.gateway.health import FleetHealth
from inference_tasks.gateway.limits import TenantLimits


@dataclass
class Gateway:
    """The gateway's state: what it was configured with, and (once started) its Redis-backed parts."""

    settings: Settings
    options: GatewaySettings
    catalogue: Catalogue
    tenants: Tenants
    dispatcher: Dispatcher | None = None
    health: FleetHealth | None = None
    limits: TenantLimits | None = None

    def served(self) -> Catalogue:
        """The catalogue restricted to INFERENCE_GATEWAY_MODELS (when set)."""
        aliases = self.options.model_aliases
        if aliases is None:
            return self.catalogue
        default = self.catalogue.default if self.catalogue.default in aliases else aliases[0]
        return Catalogue({alias: self.catalogue.entry(alias) for alias in aliases}, default, self.catalogue.path)

    def required(self) -> tuple[str, ...]:
        """The models /health waits for: INFERENCE_GATEWAY_REQUIRED_MODELS, else the served default alone."""
        return self.options.required_aliases or (self.served().default,)

    def fair_share(self) -> int:
        """INFERENCE_GATEWAY_FAIR_SHARE where there is someone to be fair to (two tenants or more), else 0: one
        tenant's requests keep their order."""
        return self.options.fair_share if len(self.tenants.names) > 1 else 0

    def started(self) -> tuple[Dispatcher, FleetHealth, TenantLimits]:
        """The parts the lifespan made; an AssertionError before the app has started."""
        assert self.dispatcher is not None and self.health is not None and self.limits is not None
        return self.dispatcher, self.health, self.limits

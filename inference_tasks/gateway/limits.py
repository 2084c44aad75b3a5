"""Each tenant's limits and usage, kept in Redis so every gateway replica shares them (lua/tenant_limits.lua).

A request is admitted by one script call that checks and takes every limit of its tenant (requests and tokens
per minute as token buckets refilled continuously, requests in flight as slots that lapse should a gateway die),
counts it, and says how many of the tenant's requests were in flight before it (fair_priority queues the deeper
ones behind other tenants' first ones); a second call when it is done frees its slot, takes its tokens (known
only then) and counts its texts, tokens and cached texts. Refusals are counted by reason. Usage lives in one
hash per UTC hour, summed across replicas by `inference-tasks usage`; this process's own counters are on the
gateway's /metrics."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry, Counter
from redis.exceptions import RedisError

from inference_tasks.config.tenants import Tenant
from inference_tasks.lua import script
from inference_tasks.redis_access.keys import USAGE_HOUR_FORMAT, USAGE_TTL_S, tenant_keys, usage_key
from inference_tasks.routing import PRIORITY_STEPS

log = logging.getLogger(__name__)
# Seconds past a request's own deadline its in-flight slot lapses, should its gateway die mid-request.
SLOT_MARGIN_S = 5.0


class LimitRefused(Exception):
    """The tenant is at `limit`; it would admit again in about `wait_s` seconds."""

    def __init__(self, tenant: Tenant, limit: str, wait_s: float) -> None:
        self.tenant, self.limit, self.wait_s = tenant, limit, wait_s
        said = getattr(tenant, limit)
        super().__init__(f"tenant {tenant.name!r} is at its {limit} limit of {said}")


@dataclass
class Usage:
    """This process's counters, per tenant and model, for /metrics (names never keys)."""

    registry: CollectorRegistry
    requests: Counter
    texts: Counter
    tokens: Counter
    cached: Counter
    refusals: Counter

    @classmethod
    def new(cls) -> Usage:
        registry = CollectorRegistry(auto_describe=True)
        labels = ["tenant", "model"]

        def counter(name: str, what: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(f"inference_gateway_{name}", what, [*labels, *extra], registry=registry)

        return cls(registry, counter("requests", "requests admitted"), counter("texts", "texts embedded or ranked"),
                   counter("tokens", "tokens the workers counted"), counter("cached_texts", "texts the cache answered"),
                   counter("refusals", "requests refused, by reason", ("reason",)))  # fmt: skip


class TenantLimits:
    """Admits and finishes requests against their tenant's limits, counting usage, over asyncio Redis."""

    def __init__(self, redis: aioredis.Redis, slot_s: float) -> None:
        """`slot_s`: how long an in-flight slot lasts at most (a request's deadline plus SLOT_MARGIN_S)."""
        self._redis = redis
        self._script = redis.register_script(script("tenant_limits"))
        self._slot_s = slot_s
        self._pending: set[asyncio.Task[None]] = set()
        self.usage = Usage.new()

    async def admit(self, tenant: Tenant, model: str) -> tuple[str, int]:
        """A new request id holding one of the tenant's in-flight slots, and how many it held before; LimitRefused
        when a limit refuses it."""
        request_id = str(uuid.uuid4())
        answer = await self._call(tenant, model, "admit", request_id, self._slot_s)
        if answer[0] != b"ok":
            limit = answer[0].decode()
            self.usage.refusals.labels(tenant.name, model, limit).inc()
            raise LimitRefused(tenant, limit, float(answer[1]))
        self.usage.requests.labels(tenant.name, model).inc()
        return request_id, int(answer[1])

    def finish_soon(self, tenant: Tenant, model: str, request_id: str | None, result: Any, texts: int) -> None:
        """`finish`, off the reply's path: the caller's answer does not wait for the count."""
        pending = asyncio.create_task(self.finish(tenant, model, request_id, result, texts))
        self._pending.add(pending)
        pending.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait for the counts still being written (at the gateway's stop)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def finish(self, tenant: Tenant, model: str, request_id: str | None, result: Any, texts: int) -> None:
        """Free the request's slot and count what it used (`result`: the task's, None when it failed);
        `request_id` None: a request no admit call counted (a tenant with no limits), counted here. Never raises:
        a Redis that cannot be told leaves the slot to lapse (SLOT_MARGIN_S past the request's deadline)."""
        usage = result.get("usage", {}) if isinstance(result, dict) else {}
        tokens, cached = int(usage.get("tokens") or 0), int(usage.get("cached") or 0)
        counted, unadmitted = texts if result is not None else 0, int(request_id is None)
        try:
            await self._call(tenant, model, "finish", request_id or "", counted, tokens, cached, unadmitted)
        except (RedisError, OSError) as error:
            log.warning("gateway: tenant %s's usage of one request was not counted: %s", tenant.name, error)
        if request_id is None:
            self.usage.requests.labels(tenant.name, model).inc()
        if result is not None:
            self.usage.texts.labels(tenant.name, model).inc(texts)
            self.usage.tokens.labels(tenant.name, model).inc(tokens)
            self.usage.cached.labels(tenant.name, model).inc(cached)

    async def refused(self, tenant: Tenant, model: str, reason: str) -> None:
        """Count a refusal the gateway made itself (model not allowed, no worker, queue full, bad input)."""
        self.usage.refusals.labels(tenant.name, model, reason).inc()
        key, field = usage_key(current_hour()), f"{tenant.name}|{model}|refused_{reason}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hincrby(key, field, 1)
                pipe.expire(key, USAGE_TTL_S)
                await pipe.execute()
        except (RedisError, OSError) as error:  # the refusal itself is what the caller needs
            log.warning("gateway: tenant %s's refusal (%s) was not counted: %s", tenant.name, reason, error)

    async def _call(self, tenant: Tenant, model: str, mode: str, request_id: str, *extra: float) -> list[Any]:
        buckets, in_flight = tenant_keys(tenant.name)
        limits = (tenant.requests_per_minute, tenant.tokens_per_minute, tenant.max_in_flight)
        arguments: list[str | float] = [mode, request_id, f"{tenant.name}|{model}|", USAGE_TTL_S, *limits, *extra]
        return list(await self._script(keys=[buckets, in_flight, usage_key(current_hour())], args=arguments))


def fair_priority(in_flight: int, fair_share: int) -> int:
    """The queue priority (0 first, 9 last) of a tenant's request that finds `in_flight` of its own being served:
    each `fair_share` more in flight is one step further back, so a tenant with one request in flight is served
    before another's backlog, whatever arrived first. 0 (fair_share off) for every request when fair_share is 0."""
    return 0 if fair_share <= 0 else min(PRIORITY_STEPS[-1], in_flight // fair_share)


def current_hour() -> str:
    return time.strftime(USAGE_HOUR_FORMAT, time.gmtime())


def retry_after(wait_s: float) -> str:
    """Retry-After's whole seconds, at least one."""
    return str(max(1, math.ceil(wait_s)))

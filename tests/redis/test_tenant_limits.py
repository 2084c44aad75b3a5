"""The gateway's tenant limits and usage (gateway/limits.py, lua/tenant_limits.lua) on a real redis-server: each
limit admits exactly up to its edge under 200 concurrent requests, refuses past it naming the limit, and counts
usage and refusals without losing an update."""

from __future__ import annotations

import asyncio
from collections import Counter

import redis.asyncio as aioredis

from inference_tasks.config.tenants import Tenant
from inference_tasks.gateway.limits import LimitRefused, TenantLimits, current_hour
from inference_tasks.redis_access.keys import usage_key
from tests.support.local import redis_client
from tests.support.waiting import wait_until

CLIENTS = 200


async def admit_all(limits: TenantLimits, tenant: Tenant, clients: int = CLIENTS) -> tuple[list[str], Counter[str]]:
    """`clients` admissions at once: the request ids admitted, and the refusals by limit."""

    async def one() -> str | LimitRefused:
        try:
            return (await limits.admit(tenant, "minilm"))[0]
        except LimitRefused as refused:
            return refused

    answers = await asyncio.gather(*(one() for _ in range(clients)))
    return [a for a in answers if isinstance(a, str)], Counter(a.limit for a in answers if isinstance(a, LimitRefused))


def pooled(url: str) -> aioredis.Redis:
    """A client as the gateway's (a blocking pool of a few connections that requests queue for)."""
    return aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(url, max_connections=16))


def test_each_limit_admits_exactly_to_its_edge_under_concurrency(fresh_redis_url):
    """200 requests at once: requests_per_minute 5 admits 5; max_in_flight 3 admits 3, and one more once one
    finishes; the usage hash counts every admission and refusal (no lost update)."""
    url = fresh_redis_url()

    async def scenario() -> None:
        redis = pooled(url)
        limits = TenantLimits(redis, slot_s=60)
        by_rate = Tenant("rate", requests_per_minute=5)
        admitted, refused = await admit_all(limits, by_rate)
        assert len(admitted) == 5 and refused == Counter({"requests_per_minute": CLIENTS - 5})
        by_slots = Tenant("slots", max_in_flight=3)
        admitted, refused = await admit_all(limits, by_slots)
        assert len(admitted) == 3 and refused == Counter({"max_in_flight": CLIENTS - 3})
        await limits.finish(by_slots, "minilm", admitted[0], {"usage": {"tokens": 7, "cached": 1}}, 2)
        more, _ = await admit_all(limits, by_slots, 5)
        assert len(more) == 1
        await limits.finish(Tenant("free"), "minilm", None, {"usage": {"tokens": 3}}, 1)  # never admitted: counted here
        await redis.aclose()

    asyncio.run(scenario())
    usage = {key.decode(): int(value) for key, value in redis_client(url).hgetall(usage_key(current_hour())).items()}
    assert usage == {
        "rate|minilm|requests": 5, "rate|minilm|refused_requests_per_minute": CLIENTS - 5,
        "slots|minilm|requests": 4, "slots|minilm|refused_max_in_flight": CLIENTS - 3 + 4,
        "slots|minilm|texts": 2, "slots|minilm|tokens": 7, "slots|minilm|cached": 1,
        "free|minilm|requests": 1, "free|minilm|texts": 1, "free|minilm|tokens": 3,
    }  # fmt: skip


def test_tokens_are_taken_when_known_and_refuse_until_refilled(fresh_redis_url):
    """tokens_per_minute 120: a request is admitted while the bucket holds any; its 150 tokens, taken when it
    finishes, put the bucket below zero, so the next is refused naming the limit with the wait until it refills."""
    url = fresh_redis_url()
    tenant = Tenant("tokens", tokens_per_minute=120)

    async def scenario() -> LimitRefused:
        redis = pooled(url)
        limits = TenantLimits(redis, slot_s=60)
        first, _ = await limits.admit(tenant, "minilm")
        await limits.finish(tenant, "minilm", first, {"usage": {"tokens": 150}}, 1)
        try:
            await limits.admit(tenant, "minilm")
        except LimitRefused as refused:
            return refused
        finally:
            await redis.aclose()
        raise AssertionError("a tenant 30 tokens in debt was admitted")

    refused = asyncio.run(scenario())
    assert refused.limit == "tokens_per_minute" and "limit of 120" in str(refused)
    assert 14 < refused.wait_s <= 15.1  # 30 tokens at 2 a second


def test_a_slot_whose_gateway_died_lapses(fresh_redis_url):
    """A request never finished (its gateway killed) holds its in-flight slot only until the slot's lifetime."""
    url = fresh_redis_url()
    tenant = Tenant("lapse", max_in_flight=1)

    async def admitted() -> bool:
        redis = pooled(url)
        try:
            await TenantLimits(redis, slot_s=0.3).admit(tenant, "minilm")
            return True
        except LimitRefused:
            return False
        finally:
            await redis.aclose()

    assert asyncio.run(admitted()) and not asyncio.run(admitted())
    wait_until(lambda: asyncio.run(admitted()), 10, "the dead request's slot to lapse", poll_s=0.1)

"""One request's way through the gateway, after it was parsed: the tenant's model list, a worker for the model,
the tenant's limits, the task, and its usage counted, every refusal in OpenAI's error shape and counted by
reason."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from inference_tasks.config.catalogue import model_queue
from inference_tasks.config.tenants import Tenant
from inference_tasks.gateway.context import Gateway
from inference_tasks.gateway.dispatch import QueueFull, TaskFailed
from inference_tasks.gateway.errors import ApiError, bad_request
from inference_tasks.gateway.limits import LimitRefused, fair_priority, retry_after


async def serve(gateway: Gateway, tenant: Tenant, alias: str, task: str, args: list[Any], kwargs: dict[str, Any],
                texts: int) -> Any:  # fmt: skip
    """The task's result for `tenant` on model `alias`, or the ApiError that refuses it (counted)."""
    _, _, limits = gateway.started()
    try:
        check_allowed(tenant, alias)
        await check_served(gateway, alias)
        # A tenant with no limits, where there is no one to be fair to, is only counted: once, when it is done.
        admit = tenant.limited or gateway.fair_share() > 0
        request_id, in_flight = await limits.admit(tenant, alias) if admit else (None, 0)
    except (RedisError, OSError) as error:
        raise redis_unavailable(error) from None
    except LimitRefused as refused:
        raise ApiError(429, f"{refused}; retry after {retry_after(refused.wait_s)} s", code="rate_limit_exceeded",
                       param=refused.limit, headers={"Retry-After": retry_after(refused.wait_s)}) from None  # fmt: skip
    except ApiError as error:
        await limits.refused(tenant, alias, error.code or str(error.status))
        raise
    result = None
    try:
        priority = fair_priority(in_flight, gateway.fair_share())
        result = await run_task(gateway, task, args, kwargs, alias, tenant.name, priority)
        return result
    except ApiError as error:
        await limits.refused(tenant, alias, error.code or str(error.status))
        raise
    finally:
        limits.finish_soon(tenant, alias, request_id, result, texts)


def check_allowed(tenant: Tenant, alias: str) -> None:
    """ApiError 403 when the tenant's `models` leave `alias` out."""
    if tenant.models is not None and alias not in tenant.models:
        raise ApiError(403, f"tenant {tenant.name!r} may not use model {alias!r}; its models: "
                       f"{', '.join(tenant.models)}", param="model", code="model_not_allowed")  # fmt: skip


async def check_served(gateway: Gateway, alias: str) -> None:
    """ApiError 503 (model_unavailable) when no worker consumes the model's queue, unless INFERENCE_GATEWAY_SCALE_WAIT_S
    lets the request wait for one (its push is what wakes a pool that scales on queue depth)."""
    _, health, _ = gateway.started()
    if gateway.options.scale_wait_s > 0 or await health.workers(alias):
        return
    raise ApiError(
        503, f"model {alias!r} has no worker consuming its queue {model_queue(alias)!r}: start one "
        f"(inference-tasks worker --model {alias}), or set INFERENCE_GATEWAY_SCALE_WAIT_S for a pool that scales "
        "from zero", code="model_unavailable", headers={"Retry-After": str(gateway.options.retry_after_s)},
    )  # fmt: skip


async def run_task(gateway: Gateway, task: str, args: list[Any], kwargs: dict[str, Any], alias: str,
                   tenant: str | None = None, priority: int = 0) -> Any:  # fmt: skip
    """The task's result, or the ApiError its failure means. A model that may be scaling up from zero
    (INFERENCE_GATEWAY_SCALE_WAIT_S) gets that much longer."""
    dispatcher, health, _ = gateway.started()
    timeout = gateway.options.timeout_s
    if gateway.options.scale_wait_s > 0 and not await health.workers(alias):
        timeout += gateway.options.scale_wait_s
    try:
        return await dispatcher.run(task, args, kwargs, alias, timeout, tenant, priority)
    except QueueFull as full:
        raise ApiError(429, f"model {alias!r} is busy: {full}; retry later", code="queue_full",
                       headers={"Retry-After": str(gateway.options.retry_after_s)}) from None  # fmt: skip
    except TimeoutError:
        raise ApiError(504, f"no result from model {alias!r} within {timeout:g} s (INFERENCE_GATEWAY_TIMEOUT_S"
                       f"{', plus INFERENCE_GATEWAY_SCALE_WAIT_S' if timeout > gateway.options.timeout_s else ''}): "
                       "its workers are down or far behind", code="timeout") from None  # fmt: skip
    except TaskFailed as failed:
        if failed.remote_type == "InvalidInput":
            raise bad_request(failed.message) from None
        raise ApiError(500, f"the task failed: {failed}", code="task_failed") from None
    except (RedisError, OSError) as error:
        raise redis_unavailable(error) from None


def redis_unavailable(error: Exception) -> ApiError:
    return ApiError(503, f"Redis is unreachable: {type(error).__name__}: {error}", code="redis_unavailable")

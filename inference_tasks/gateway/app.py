"""The gateway's routes on Starlette: each request checked, sent as one task, answered in OpenAI's shapes.

Every handler is async end to end: the push and the result wait are asyncio Redis commands (dispatch.py,
results.py), so a thousand waiting requests hold no thread. What a request may carry is what a task may
(validation.py's limits), and the body is refused past INFERENCE_GATEWAY_MAX_BODY_BYTES before it is parsed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import Catalogue, load_catalogue, model_queue
from inference_tasks.config.checks import ConfigError
from inference_tasks.config.gateway import GatewaySettings
from inference_tasks.gateway import embeddings_api, models_api, rerank_api
from inference_tasks.gateway.auth import check_bearer
from inference_tasks.gateway.dispatch import Dispatcher, QueueFull, TaskFailed
from inference_tasks.gateway.errors import ApiError, bad_request
from inference_tasks.gateway.health import FleetHealth
from inference_tasks.gateway.redis_clients import broker_client, results_client
from inference_tasks.gateway.results import ResultWaiter
from inference_tasks.routing import EMBED_TASK, RERANK_TASK

log = logging.getLogger(__name__)
Handler = Callable[[Request, "Gateway"], Awaitable[Response]]


@dataclass
class Gateway:
    """What the routes share, made at start (lifespan): settings, the catalogue, the dispatcher, health."""

    settings: Settings
    options: GatewaySettings
    catalogue: Catalogue
    keys: tuple[str, ...]
    dispatcher: Dispatcher | None = None
    health: FleetHealth | None = None

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


async def embeddings(request: Request, gateway: Gateway) -> Response:
    body = await json_body(request, gateway.options.max_body_bytes)
    entry = models_api.resolve(gateway.served(), body.get("model"), EMBED_TASK)
    asked = embeddings_api.parse(body, entry, gateway.settings)
    await check_served(gateway, entry.alias)
    result = await run_task(gateway, EMBED_TASK, [asked.texts], asked.task_kwargs(), entry.alias)
    model = body.get("model") or entry.alias
    return Response(embeddings_api.response(result, asked, model), media_type="application/json")


async def rerank(request: Request, gateway: Gateway) -> Response:
    body = await json_body(request, gateway.options.max_body_bytes)
    entry = models_api.resolve(gateway.served(), body.get("model"), RERANK_TASK)
    asked = rerank_api.parse(body, entry, gateway.settings)
    await check_served(gateway, entry.alias)
    result = await run_task(gateway, RERANK_TASK, asked.task_args(), asked.task_kwargs(), entry.alias)
    return JSONResponse(rerank_api.response(result, asked, body.get("model") or entry.alias))


async def models(request: Request, gateway: Gateway) -> Response:
    assert gateway.health is not None  # made at start
    report = await gateway.health.report()
    return JSONResponse(models_api.models_list(gateway.served(), report["models"]))


async def health(request: Request, gateway: Gateway) -> Response:
    assert gateway.health is not None  # made at start
    report = await gateway.health.report()
    return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503)


async def live(request: Request, gateway: Gateway) -> Response:
    return JSONResponse({"status": "live"})


async def check_served(gateway: Gateway, alias: str) -> None:
    """ApiError 503 (model_unavailable) when no worker consumes the model's queue, unless INFERENCE_GATEWAY_SCALE_WAIT_S
    lets the request wait for one (its push is what wakes a pool that scales on queue depth)."""
    assert gateway.health is not None  # made at start
    if gateway.options.scale_wait_s > 0 or await gateway.health.workers(alias):
        return
    raise ApiError(
        503, f"model {alias!r} has no worker consuming its queue {model_queue(alias)!r}: start one "
        f"(inference-tasks worker --model {alias}), or set INFERENCE_GATEWAY_SCALE_WAIT_S for a pool that scales "
        "from zero", code="model_unavailable", headers={"Retry-After": str(gateway.options.retry_after_s)},
    )  # fmt: skip


async def run_task(gateway: Gateway, task: str, args: list[Any], kwargs: dict[str, Any], alias: str) -> Any:
    """The task's result, or the ApiError its failure means. A model that may be scaling up from zero
    (INFERENCE_GATEWAY_SCALE_WAIT_S) gets that much longer."""
    assert gateway.dispatcher is not None and gateway.health is not None  # made at start
    timeout = gateway.options.timeout_s
    if gateway.options.scale_wait_s > 0 and not await gateway.health.workers(alias):
        timeout += gateway.options.scale_wait_s
    try:
        return await gateway.dispatcher.run(task, args, kwargs, alias, timeout)
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
        raise ApiError(
            503, f"Redis is unreachable: {type(error).__name__}: {error}", code="redis_unavailable"
        ) from None


async def json_body(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, refused (413) past `limit` bytes whether or not it says its length."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    try:
        body = orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as error:
        raise bad_request(f"the body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the body must be a JSON object, got {type(body).__name__}")
    return body


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the body is over {limit} bytes (INFERENCE_GATEWAY_MAX_BODY_BYTES); send fewer or "
                    "shorter inputs per request", code="body_too_large")  # fmt: skip


def endpoint(
    handler: Handler, gateway: Gateway, authenticated: bool = True
) -> Callable[[Request], Awaitable[Response]]:
    """`handler` behind the key check, with ApiError answered in OpenAI's shape."""

    async def call(request: Request) -> Response:
        try:
            if authenticated:
                check_bearer(request.headers.get("authorization"), gateway.keys)
            return await handler(request, gateway)
        except ApiError as error:
            return error.response()

    return call


def build_app(settings: Settings, options: GatewaySettings, celery_app: Any, no_auth: bool = False) -> Starlette:
    """The ASGI app. `no_auth`: serve without keys (the command allows it on a loopback address only)."""
    catalogue = load_catalogue(settings.models_file)
    keys = () if no_auth else options.keys
    gateway = Gateway(settings, options, catalogue, keys)
    for alias in options.model_aliases or ():
        catalogue.entry(alias)  # UnknownModel now, not at the first request
    unserved = set(gateway.required()) - set(gateway.served().models)
    if unserved:
        raise ConfigError(f"INFERENCE_GATEWAY_REQUIRED_MODELS names {', '.join(sorted(unserved))}, which this gateway "
                          f"does not serve (served: {', '.join(sorted(gateway.served().models))})")  # fmt: skip

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        broker, results = broker_client(settings), results_client(settings)
        waiter = ResultWaiter(results)
        gateway.dispatcher = Dispatcher(broker, waiter, options.max_queue_depth)
        gateway.health = FleetHealth(celery_app, tuple(gateway.served().models), gateway.required(),
                                     options.health_ttl_s)  # fmt: skip
        try:
            yield
        finally:
            await waiter.close()
            await broker.aclose()
            await results.aclose()

    routes = [
        Route("/v1/embeddings", endpoint(embeddings, gateway), methods=["POST"]),
        Route("/v1/rerank", endpoint(rerank, gateway), methods=["POST"]),
        Route("/v1/models", endpoint(models, gateway), methods=["GET"]),
        Route("/health", endpoint(health, gateway, authenticated=False), methods=["GET"]),
        Route("/health/live", endpoint(live, gateway, authenticated=False), methods=["GET"]),
    ]
    handlers = {HTTPException: http_error, Exception: server_error}
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)


async def http_error(request: Request, error: Exception) -> Response:
    """Starlette's routing refusals (404 no such route, 405 a method the route does not take) in OpenAI's shape."""
    assert isinstance(error, HTTPException)
    if error.status_code == 405:
        headers = dict(error.headers or {})
        message = f"{request.method} is not allowed on {request.url.path}; allowed: {headers.get('Allow', '')}"
        return ApiError(405, message, code="method_not_allowed", headers=headers).response()
    if error.status_code == 404:
        return ApiError(404, f"no route {request.url.path}; the routes are /v1/embeddings, /v1/rerank, /v1/models, "
                        "/health and /health/live", code="not_found").response()  # fmt: skip
    return ApiError(
        error.status_code, str(error.detail), code="http_error", headers=dict(error.headers or {})
    ).response()


async def server_error(request: Request, error: Exception) -> Response:
    """An unexpected failure: logged with its traceback, answered in OpenAI's shape without internals."""
    log.exception("gateway: %s %s failed", request.method, request.url.path, exc_info=error)
    return ApiError(
        500, "the gateway failed on this request; the log has the details", code="internal_error"
    ).response()

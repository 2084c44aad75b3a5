"""The gateway's routes on Starlette: each request checked, sent as one task, answered in OpenAI's shapes.

Every handler is async end to end: the push and the result wait are asyncio Redis commands (dispatch.py,
results.py), so a thousand waiting requests hold no thread. What a request may carry is what a task may
(validation.py's limits), and the body is refused past INFERENCE_GATEWAY_MAX_BODY_BYTES before it is parsed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import Catalogue, load_catalogue
from inference_tasks.config.checks import ConfigError
from inference_tasks.config.gateway import GatewaySettings
from inference_tasks.config.tenants import Tenant, Tenants
from inference_tasks.gateway import embeddings_api, models_api, rerank_api
from inference_tasks.gateway.auth import anonymous, check_bearer
from inference_tasks.gateway.context import Gateway
from inference_tasks.gateway.dispatch import Dispatcher
from inference_tasks.gateway.errors import ApiError, bad_request
from inference_tasks.gateway.health import FleetHealth
from inference_tasks.gateway.limits import SLOT_MARGIN_S, TenantLimits
from inference_tasks.gateway.redis_clients import broker_client, results_client
from inference_tasks.gateway.results import ResultWaiter
from inference_tasks.gateway.serving import serve
from inference_tasks.routing import EMBED_TASK, RERANK_TASK

log = logging.getLogger(__name__)
Handler = Callable[[Request, Gateway, Tenant], Awaitable[Response]]


async def embeddings(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    body = await json_body(request, gateway.options.max_body_bytes)
    entry = models_api.resolve(gateway.served(), body.get("model"), EMBED_TASK)
    asked = embeddings_api.parse(body, entry, gateway.settings)
    result = await serve(gateway, tenant, entry.alias, EMBED_TASK, [asked.texts], asked.task_kwargs(), len(asked.texts))
    model = body.get("model") or entry.alias
    return Response(embeddings_api.response(result, asked, model), media_type="application/json")


async def rerank(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    body = await json_body(request, gateway.options.max_body_bytes)
    entry = models_api.resolve(gateway.served(), body.get("model"), RERANK_TASK)
    asked = rerank_api.parse(body, entry, gateway.settings)
    texts = len(asked.task_args()[1]) + 1  # the documents and the query
    result = await serve(gateway, tenant, entry.alias, RERANK_TASK, asked.task_args(), asked.task_kwargs(), texts)
    return JSONResponse(rerank_api.response(result, asked, body.get("model") or entry.alias))


async def models(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    report = await gateway.started()[1].report()
    served = gateway.served()
    if tenant.models is not None:  # what this tenant may use
        served = Catalogue({alias: entry for alias, entry in served.models.items() if alias in tenant.models},
                           served.default, served.path)  # fmt: skip
    return JSONResponse(models_api.models_list(served, report["models"]))


async def health(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    report = await gateway.started()[1].report()
    return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503)


async def live(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    return JSONResponse({"status": "live"})


async def metrics(request: Request, gateway: Gateway, tenant: Tenant) -> Response:
    """This process's usage counters per tenant and model, in Prometheus' text format (tenant names, no keys)."""
    registry = gateway.started()[2].usage.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


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
            header = request.headers.get("authorization")
            tenant = check_bearer(header, gateway.tenants) if authenticated else anonymous()
            return await handler(request, gateway, tenant)
        except ApiError as error:
            return error.response()

    return call


def build_app(
    settings: Settings, options: GatewaySettings, celery_app: Any, tenants: Tenants, no_auth: bool = False
) -> Starlette:
    """The ASGI app. `no_auth`: serve without keys (the command allows it on a loopback address only)."""
    catalogue = load_catalogue(settings.models_file)
    gateway = Gateway(settings, options, catalogue, Tenants() if no_auth else tenants)
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
        gateway.limits = TenantLimits(broker, options.timeout_s + options.scale_wait_s + SLOT_MARGIN_S)
        try:
            yield
        finally:
            await gateway.limits.drain()
            await waiter.close()
            await broker.aclose()
            await results.aclose()

    routes = [
        Route("/v1/embeddings", endpoint(embeddings, gateway), methods=["POST"]),
        Route("/v1/rerank", endpoint(rerank, gateway), methods=["POST"]),
        Route("/v1/models", endpoint(models, gateway), methods=["GET"]),
        Route("/health", endpoint(health, gateway, authenticated=False), methods=["GET"]),
        Route("/health/live", endpoint(live, gateway, authenticated=False), methods=["GET"]),
        Route("/metrics", endpoint(metrics, gateway, authenticated=False), methods=["GET"]),
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

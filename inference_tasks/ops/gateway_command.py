"""`inference-tasks gateway`: the OpenAI-compatible HTTP gateway (inference_tasks/gateway/) on uvicorn."""

from __future__ import annotations

import os
import sys

import click

DEFAULT_GATEWAY_PORT = 8080


@click.command("gateway")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=DEFAULT_GATEWAY_PORT, show_default=True, help="The port to listen on.")
@click.option("--no-auth", is_flag=True, help="Serve without API keys: only on a loopback address.")
@click.option("--log-level", default="info", show_default=True, help="uvicorn's log level.")
def gateway_command(host: str, port: int, no_auth: bool, log_level: str) -> None:
    """Serve POST /v1/embeddings, POST /v1/rerank, GET /v1/models and GET /health over the queues: no model
    here, each request one task. Keys: INFERENCE_GATEWAY_API_KEYS, or tenants with limits in
    INFERENCE_GATEWAY_TENANTS_FILE (docs/gateway.md)."""
    try:
        import uvicorn
    except ImportError:
        raise click.ClickException(
            "the gateway needs the `gateway` extra: pip install 'inference-tasks[gateway]'"
        ) from None
    from inference_tasks import app as celery_app
    from inference_tasks.config import ConfigError, load_settings
    from inference_tasks.config.gateway import GatewaySettings
    from inference_tasks.config.tenants import load_tenants
    from inference_tasks.gateway.app import build_app
    from inference_tasks.gateway.auth import auth_problem

    try:
        options = GatewaySettings.from_env(os.environ)
        tenants = load_tenants(options.tenants_file, options.keys)
        problem = auth_problem(tenants, no_auth, host)
        asgi = None if problem else build_app(load_settings(), options, celery_app, tenants, no_auth=no_auth)
    except ConfigError as error:
        problem = str(error)
    if problem or asgi is None:
        click.echo(f"gateway: {problem}", err=True)
        sys.exit(2)
    uvicorn.run(asgi, host=host, port=port, log_level=log_level, access_log=False, lifespan="on")

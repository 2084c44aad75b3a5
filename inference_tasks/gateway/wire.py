"""The gateway's side of the wire (docs/wire-protocol.md): a Celery protocol v2 message, pushed with the
same check-and-push Lua script as the Ruby client (lua/push_unless_full.lua), so the gateway needs no
Celery producer (whose publish blocks) and a full queue refuses the push in the same round trip."""

from __future__ import annotations

import base64
import socket
import time
import uuid
from typing import Any

import orjson

from inference_tasks.routing import SENT_AT_HEADER, TENANT_HEADER

FINAL_STATES = ("SUCCESS", "FAILURE", "REVOKED")


def task_message(
    task: str, args: list[Any], kwargs: dict[str, Any], task_id: str, queue: str, tenant: str | None = None,
    priority: int = 0,
) -> bytes:  # fmt: skip
    """A Celery protocol v2 message as kombu's Redis transport stores it, JSON (never pickle); `tenant` names
    whose request it is (TENANT_HEADER); `priority` as the list it is pushed onto says it."""
    headers: dict[str, Any] = {
        "lang": "py", "task": task, "id": task_id, "root_id": task_id, "parent_id": None, "group": None,
        "retries": 0, "eta": None, "expires": None, "origin": f"gateway@{socket.gethostname()}",
        SENT_AT_HEADER: time.time(),
    }  # fmt: skip
    if tenant is not None:
        headers[TENANT_HEADER] = tenant
    body = [args, kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    return orjson.dumps({
        "body": base64.b64encode(orjson.dumps(body)).decode("ascii"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": {
            "correlation_id": task_id, "reply_to": "", "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": priority, "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
        },
    })  # fmt: skip


def new_task_id() -> str:
    return str(uuid.uuid4())

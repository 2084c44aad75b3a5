"""Raw Celery protocol v2 task messages, built by hand the way a non-Python producer builds them.

The wire contract the Ruby client (deploy/rails/lib/inference_tasks.rb) implements, in Python:
the tests push these onto the queue's Redis list to check the contract (and malformed variants
of it); the micro-batching benchmark uses them for a Rails-like burst, an LPUSH per task with
none of Celery's producer overhead on the machine the worker shares.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any


def task_message(task: str, args: list, kwargs: dict | None = None, task_id: str | None = None,
                 routing_key: str = "inference", priority: int = 0) -> dict[str, Any]:  # fmt: skip
    """The envelope an LPUSH onto the queue's Redis list must carry."""
    task_id = task_id or str(uuid.uuid4())
    body = [args, kwargs or {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    return {
        "body": base64.b64encode(json.dumps(body).encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "raw",
            "task": task,
            "id": task_id,
            "root_id": task_id,
            "parent_id": None,
            "group": None,
            "retries": 0,
            "eta": None,
            "expires": None,
        },
        "properties": {
            "correlation_id": task_id,
            "reply_to": "",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": routing_key},
            "priority": priority,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }


def encode(message: dict[str, Any] | bytes) -> bytes:
    """The bytes to LPUSH (bytes pass through: tests push malformed ones)."""
    return message if isinstance(message, bytes) else json.dumps(message).encode()

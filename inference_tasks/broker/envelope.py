"""What a well-formed message on our queues is: Celery protocol v2, JSON, every field Celery relies on.

Celery and kombu trust the bytes they pop from Redis. Observed with celery 5.7 / kombu 5.7: bytes
that are not JSON kill the whole worker ("Unrecoverable error"), a message without headers.id
makes the consumer reconnect forever, one without properties.delivery_tag is silently lost. Any
program that can LPUSH (a Rails app, a typo in redis-cli) could do that, so every raw message is
screened here first, and nothing that fails is ever decoded further, let alone executed.

Beyond the protocol, screening bounds what a valid message may cost the worker's main process
before anything parses it (size, nesting depth, value counts: json_shape.py), admits only the
task names producers are offered (never Celery's built-in `celery.*` tasks), and refuses an ETA
further ahead than the scheduling horizon (a worker holds an ETA task in memory until it is due).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inference_tasks.broker.json_shape import bounded
from inference_tasks.broker.limits import (
    ScreeningLimits,
    argument_depth_problem,
    depth_problem,
    items_problem,
    schedule_problem,
    with_max_bytes,
    within_depth,
)
from inference_tasks.broker.replies import SIDEKIQ_REPLY_HEADER, reply_spec_problem
from inference_tasks.redis_access.durable import DURABLE_HEADER
from inference_tasks.routing import SENT_AT_HEADER

ACCEPTED_CONTENT_TYPE = "application/json"
ACCEPTED_CONTENT_ENCODING = "utf-8"
ACCEPTED_BODY_ENCODING = "base64"


class MalformedMessage(ValueError):
    """A raw queue message that is not a valid JSON Celery protocol v2 task; it was dead-lettered."""


class TooManyRedeliveries(RuntimeError):
    """A task whose every attempt ended with its worker process gone; it was dead-lettered."""


@dataclass(frozen=True)
class Screening:
    """The outcome of screening one raw message: the decoded envelope, or why it was refused."""

    envelope: dict[str, Any] | None
    problem: str | None
    task_id: str | None = None
    task_name: str | None = None
    # The message's sidekiq_reply request when it is itself valid: a refused message still gets
    # its FAILURE reply job, so no caller waits forever for one.
    reply: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.problem is None


def screen(raw: bytes, limits: ScreeningLimits, now: datetime | None = None) -> Screening:
    """Check a raw Redis list item against the protocol and the limits; never raises."""
    try:
        return _screen(raw, limits, now)
    except Exception as exc:  # noqa: BLE001 - a screening bug must not take the worker down either
        return Screening(None, f"could not be screened ({type(exc).__name__}: {exc})")


# An oversized message is still parsed for its task id (so its producer gets a FAILURE result)
# up to this multiple of the limit; beyond it, parsing itself would be the attack.
OVERSIZE_PARSE_FACTOR = 2


def _screen(raw: bytes, limits: ScreeningLimits, now: datetime | None) -> Screening:
    if len(raw) > limits.max_bytes:
        return _oversized(raw, limits, now)
    shape = bounded(raw, limits.max_depth, limits.max_items)
    if shape.items > limits.max_items:
        return Screening(None, items_problem("message", shape.items, limits))
    envelope, problem = _decoded_envelope(raw, shape.depth, limits)
    if envelope is None:
        return Screening(None, problem)
    headers = envelope["headers"]
    task_id = headers.get("id") if _is_text(headers.get("id")) else None
    task_name = headers.get("task") if _is_text(headers.get("task")) else None
    too_deep = shape.depth is None or shape.depth > limits.max_depth
    # A reply spec nested past the limit is not honoured: writing its job would walk that nesting.
    reply_spec = headers.get(SIDEKIQ_REPLY_HEADER)
    reply = requested_reply(headers) if not too_deep or within_depth(reply_spec, limits.max_depth) else None
    problem = (
        (depth_problem("message", shape.depth, limits) if too_deep else None)
        or _identity_problem(task_id, task_name, limits)
        or _header_problem(headers)
        or schedule_problem(headers, limits, now)
        or _envelope_problem(envelope)
        or _body_problem_in(envelope, limits)
    )
    return Screening(None if problem else envelope, problem, task_id, task_name, reply)


def _oversized(raw: bytes, limits: ScreeningLimits, now: datetime | None) -> Screening:
    too_big = f"message is {len(raw)} bytes, over the limit of {limits.max_bytes} (INFERENCE_MAX_MESSAGE_BYTES)"
    if len(raw) > limits.max_bytes * OVERSIZE_PARSE_FACTOR:
        return Screening(None, too_big)
    found = _screen(raw, with_max_bytes(limits, len(raw)), now)
    return Screening(None, too_big, found.task_id, found.task_name, found.reply)


def _decoded_envelope(
    raw: bytes, depth: int | None, limits: ScreeningLimits
) -> tuple[dict[str, Any] | None, str | None]:
    """The envelope, a JSON object with a headers object; or None and why not."""
    try:
        envelope = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "message is not UTF-8 text"
    except RecursionError:
        return None, depth_problem("message", depth, limits)
    except ValueError as exc:
        return None, f"message is not JSON ({exc})"
    if not isinstance(envelope, dict):
        return None, f"message is JSON {type(envelope).__name__}, not a Celery message envelope (object)"
    if not isinstance(envelope.get("headers"), dict):
        return None, "message has no headers object (Celery protocol v2 needs headers.id and headers.task)"
    return envelope, None


def _identity_problem(task_id: str | None, task_name: str | None, limits: ScreeningLimits) -> str | None:
    if task_id is None:
        return "headers.id must be a non-empty string (the task id)"
    if task_name is None:
        return "headers.task must be a non-empty string (the task name)"
    if not limits.accepts_task(task_name):
        return (
            f"headers.task {_shown(task_name)} is not a task producers may send here (accepted: "
            f"{limits.described_tasks()}; INFERENCE_EXTRA_TASKS adds your own)"
        )
    return None


def _body_problem_in(envelope: dict[str, Any], limits: ScreeningLimits) -> str | None:
    """The body's bounds, measured before it is parsed, then its shape and each argument's depth."""
    try:
        body_bytes = base64.b64decode(envelope["body"], validate=True)
    except (binascii.Error, ValueError) as exc:
        return f"body is not base64-encoded UTF-8 JSON ({type(exc).__name__})"
    shape = bounded(body_bytes, limits.max_depth, limits.max_items)
    if shape.items > limits.max_items:
        return items_problem("body", shape.items, limits)
    if shape.depth is None or shape.depth > limits.max_depth:
        return depth_problem("body", shape.depth, limits)
    try:
        body = json.loads(body_bytes.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return f"body is not base64-encoded UTF-8 JSON ({type(exc).__name__})"
    return _body_problem(body) or argument_depth_problem(body, shape.depth, limits)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 100 else value[:100] + "...")


def requested_reply(headers: dict[str, Any]) -> dict[str, Any] | None:
    """The headers' sidekiq_reply spec if it can be honoured, else None."""
    spec = headers.get(SIDEKIQ_REPLY_HEADER)
    return spec if spec is not None and reply_spec_problem(spec) is None else None


def _envelope_problem(envelope: dict[str, Any]) -> str | None:
    content_type = envelope.get("content-type")
    if content_type is None:
        return f"content-type is missing (only {ACCEPTED_CONTENT_TYPE} is accepted)"
    if content_type != ACCEPTED_CONTENT_TYPE:
        return f"content-type {content_type!r} is not accepted (only {ACCEPTED_CONTENT_TYPE})"
    encoding = envelope.get("content-encoding")
    if not isinstance(encoding, str) or encoding.lower() != ACCEPTED_CONTENT_ENCODING:
        return f"content-encoding must be {ACCEPTED_CONTENT_ENCODING!r}, got {encoding!r}"
    if not isinstance(envelope.get("body"), str):
        return "body must be a base64 string"
    properties = envelope.get("properties")
    if not isinstance(properties, dict):
        return "properties object is missing"
    if properties.get("body_encoding") != ACCEPTED_BODY_ENCODING:
        return f"properties.body_encoding must be {ACCEPTED_BODY_ENCODING!r}, got {properties.get('body_encoding')!r}"
    if not _is_text(properties.get("delivery_tag")):
        return "properties.delivery_tag must be a non-empty string (unique per message)"
    delivery_info = properties.get("delivery_info")
    if not isinstance(delivery_info, dict):
        return "properties.delivery_info object is missing"
    for key in ("exchange", "routing_key"):
        if not isinstance(delivery_info.get(key), str):
            return f"properties.delivery_info.{key} must be a string"
    priority = properties.get("priority", 0)
    if priority is not None and (
        not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 255
    ):
        return "properties.priority must be an integer from 0 to 255"
    return None


def _header_problem(headers: dict[str, Any]) -> str | None:
    for key in ("root_id", "parent_id", "group", "shadow", "lang", "argsrepr", "kwargsrepr", "origin"):
        if headers.get(key) is not None and not isinstance(headers[key], str):
            return f"headers.{key} must be a string or null"
    retries = headers.get("retries")
    if retries is not None and not (_is_integer(retries) and retries >= 0):
        return "headers.retries must be a non-negative integer"
    for key in ("eta", "expires"):
        value = headers.get(key)
        if value is not None and not is_iso_datetime(value):
            return f"headers.{key} must be an ISO 8601 date-time string or null"
    limits = headers.get("timelimit")
    if limits is not None and not (
        isinstance(limits, list) and len(limits) == 2 and all(_is_number_or_none(limit) for limit in limits)
    ):
        return "headers.timelimit must be [soft, hard] (numbers or null)"
    if headers.get("ignore_result") is not None and not isinstance(headers["ignore_result"], bool):
        return "headers.ignore_result must be a boolean"
    return _celery_header_problem(headers) or _our_header_problem(headers)


def _celery_header_problem(headers: dict[str, Any]) -> str | None:
    """Headers Celery's worker reads as it handles a request (revocation by stamp, groups, replacing):
    found by the wire fuzzer, a float in stamped_headers raised in the main process."""
    for key in ("stamped_headers", "groups"):
        value = headers.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
            return f"headers.{key} must be a list of strings or null"
    if headers.get("stamps") is not None and not isinstance(headers["stamps"], dict):
        return "headers.stamps must be an object or null"
    nesting = headers.get("replaced_task_nesting")
    if nesting is not None and not (_is_integer(nesting) and nesting >= 0):
        return "headers.replaced_task_nesting must be a non-negative integer or null"
    if headers.get("group_index") is not None and not _is_integer(headers["group_index"]):
        return "headers.group_index must be an integer or null"
    return None


def _our_header_problem(headers: dict[str, Any]) -> str | None:
    if headers.get(DURABLE_HEADER) is not None and not isinstance(headers[DURABLE_HEADER], bool):
        return f"headers.{DURABLE_HEADER} must be true, false or null"
    sent_at = headers.get(SENT_AT_HEADER)
    if sent_at is not None and not (_is_number_or_none(sent_at) and math.isfinite(sent_at)):
        return f"headers.{SENT_AT_HEADER} must be a number (Unix seconds) or null"
    if headers.get(SIDEKIQ_REPLY_HEADER) is not None:
        return reply_spec_problem(headers[SIDEKIQ_REPLY_HEADER])
    return None


def _body_problem(body: Any) -> str | None:
    if not (isinstance(body, list) and len(body) == 3):
        return "body must be the JSON array [args, kwargs, embed]"
    args, kwargs, embed = body
    if not isinstance(args, list):
        return "body[0] (args) must be an array"
    if not isinstance(kwargs, dict):
        return "body[1] (kwargs) must be an object"
    if embed is not None and not isinstance(embed, dict):
        return "body[2] (embed: callbacks, errbacks, chain, chord) must be an object or null"
    for key in ("callbacks", "errbacks", "chain"):
        if embed and embed.get(key) is not None and not isinstance(embed[key], list):
            return f"body[2].{key} must be an array or null"
    if embed and embed.get("chord") is not None and not isinstance(embed["chord"], dict):
        return "body[2].chord must be an object or null"
    return None


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def is_iso_datetime(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True

"""The checks Settings runs on its values (a mapping of field name to value, so this module needs no
Settings class): each field's own rule in one table, the Redis URLs, and the rules that relate two
settings. Every message names the environment variable and what is allowed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from inference_tasks import devices
from inference_tasks.config.defaults import (
    BACKENDS,
    CELERY_BUILTIN_PREFIX,
    ENV_PREFIX,
    MAX_MEASURE_ROUNDS,
    MAX_MICROBATCH_WAIT_MS,
    OPENVINO_PRECISIONS,
    PROFILES,
    REDIS_SCHEMES,
    SENTINEL_SCHEME,
    TLS_CERT_REQS,
    TORCH_ENGINES,
)

TASK_NAME = re.compile(r"^[\w:-]+(\.[\w:-]+)*(\.\*)?$")


class ConfigError(ValueError):
    """A setting in the environment cannot be used; the message names the variable."""


def check_sentinel_url(variable: str, url: str) -> None:
    """Every `;`-separated part must be sentinel://[:password@]host:port; a database, if any, on the last."""
    sentinel_addresses(variable, url)


def sentinel_addresses(variable: str, url: str) -> list[tuple[str, int]]:
    """The (host, port) of every `;`-separated part of a sentinel:// URL.

    A part without a host or a port is a ConfigError naming the variable: passed on as None it would
    reach redis-py's Sentinel and fail only at the first connection, far from the setting.
    """
    addresses = []
    for part in url.split(";"):
        parts = urlsplit(part)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme != SENTINEL_SCHEME or not parts.hostname or not port:
            raise ConfigError(f"{variable}: {redact(part)!r} is not sentinel://host:port")
        addresses.append((parts.hostname, port))
    return addresses


def database_on_every_part(url: str) -> str:
    """A sentinel:// URL with its database on every `;`-separated part.

    The documented form gives it once, on the last part (`sentinel://a:26379;sentinel://b:26379/2`), and
    our own clients take it from whichever part has it; kombu and Celery read it from the first part
    only, so without this the queues and results would sit in database 0 while `status` and the heads
    read database 2.
    """
    parts = [urlsplit(part) for part in url.split(";")]
    database = next((part.path.strip("/") for part in parts if part.path.strip("/")), "")
    if not database:
        return url
    return ";".join(part._replace(path=f"/{database}").geturl() for part in parts)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=f"{user}:***@{host}{port}").geturl()


def _one_of(choices: tuple[str, ...]) -> tuple[Callable[[Any], bool], Callable[[Any], str]]:
    return (lambda value: value in choices), (lambda value: f"must be one of {choices}, got {value!r}")


def _at_least(low: int, meaning: str = "") -> tuple[Callable[[Any], bool], Callable[[Any], str]]:
    return (lambda value: value >= low), (lambda value: f"must be at least {low}{meaning}")


# Settings whose values need at least one of something (processes, seconds, bytes, entries).
_POSITIVE_FIELDS = (
    "concurrency",
    "children_per_gpu",
    "encode_batch_size_cpu",
    "encode_batch_size_cuda",
    "trainer_threads",
    "max_memory_per_child_mb",
    "max_batch_texts",
    "max_text_chars",
    "max_document_chars",
    "max_labels",
    "max_label_chars",
    "result_expires_s",
    "training_result_expires_s",
    "soft_time_limit_s",
    "time_limit_s",
    "visibility_timeout_s",
    "max_message_bytes",
    "max_nesting_depth",
    "max_argument_depth",
    "max_message_items",
    "max_eta_s",
    "dead_letter_max",
    "dead_letter_ttl_s",
    "durable_claim_ttl_s",
    "max_train_texts",
    "max_corpus_texts",
    "corpus_expires_s",
    "cache_ttl_s",
    "cache_timeout_ms",
)
# Each setting's own rule: (field, allowed(value), what the error says after the variable's name).
# Rules that relate two settings are in check_relations; the Redis URLs in check_redis.
FIELD_RULES: tuple[tuple[str, Callable[[Any], bool], Callable[[Any], str]], ...] = (
    ("redis_tls_cert_reqs", lambda value: value in TLS_CERT_REQS, lambda _: f"must be one of {TLS_CERT_REQS}"),
    ("profile", *_one_of(PROFILES)),
    (
        "device",
        devices.is_valid_device,
        lambda value: f"must be cpu, cuda, cuda:N or auto, got {value!r}",
    ),
    ("cuda_dtype", *_one_of(devices.DTYPES)),
    ("backend", *_one_of(BACKENDS)),
    ("openvino_precision", *_one_of(OPENVINO_PRECISIONS)),
    ("torch_engine", *_one_of(TORCH_ENGINES)),
    *((name, *_at_least(1)) for name in _POSITIVE_FIELDS),
    (
        "flower_basic_auth",
        lambda value: value is None or ":" in value,
        lambda _: "must be user:password",
    ),
    ("min_examples_per_label", *_at_least(2, " (one to train, one to test)")),
    ("max_tasks_per_child", lambda value: value >= 0, lambda _: "must be 0 (never recycle) or more"),
    (
        "max_tasks_per_child_jitter",
        lambda value: 0 <= value < 1,
        lambda _: "must be from 0 up to (not including) 1",
    ),
    ("microbatch_max_texts", lambda value: value >= 0, lambda _: "must be 0 (off) or more"),
    ("microbatch_max_tokens", lambda value: value >= 0, lambda _: "must be 0 (texts only) or more"),
    (
        "microbatch_wait_ms",
        lambda value: 0 <= value <= MAX_MICROBATCH_WAIT_MS,
        lambda value: f"must be from 0 to {MAX_MICROBATCH_WAIT_MS:.0f} (milliseconds), got {value}",
    ),
    ("max_redeliveries", lambda value: value >= 0, lambda _: "must be 0 or more"),
    (
        "measure_rounds",
        lambda value: 1 <= value <= MAX_MEASURE_ROUNDS,
        lambda value: f"must be from 1 to {MAX_MEASURE_ROUNDS}, got {value}",
    ),
)


def check_redis_url(variable: str, url: str, master: str | None, master_variable: str) -> None:
    """One Redis URL: its scheme, and for a Sentinel URL its parts and the master name that goes with it."""
    scheme = urlsplit(url).scheme
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(
            f"{variable} must be redis://, rediss://, unix:// or sentinel://host:port;sentinel://host:port[/db], "
            f"not {scheme!r}"
        )
    if scheme == SENTINEL_SCHEME:
        check_sentinel_url(variable, url)
        if not master:
            raise ConfigError(
                f"{variable} is a Sentinel URL: set {master_variable} to the name of the master group the "
                "sentinels monitor (as in `sentinel monitor <name> ...`)"
            )


def check_redis(values: Mapping[str, Any]) -> None:
    """The broker's, the results' and Sidekiq's Redis URLs (schemes, Sentinel parts and master names)."""
    check_redis_url(
        "REDIS_URL", values["redis_url"], values["redis_sentinel_master"], f"{ENV_PREFIX}REDIS_SENTINEL_MASTER"
    )
    if values["result_redis_url"]:
        master = values["result_redis_sentinel_master"] or values["redis_sentinel_master"]
        check_redis_url(f"{ENV_PREFIX}RESULT_REDIS_URL", values['result_redis_url'], master,
                        f"{ENV_PREFIX}RESULT_REDIS_SENTINEL_MASTER")  # fmt: skip
    urls = (values["redis_url"], values["result_redis_url"] or "", values["sidekiq_redis_url"] or "",
            values["cache_url"] or "")  # fmt: skip
    if values["redis_sentinel_tls"] and not any(urlsplit(url).scheme == SENTINEL_SCHEME for url in urls):
        raise ConfigError(
            f"{ENV_PREFIX}REDIS_SENTINEL_TLS=true needs a sentinel:// URL (REDIS_URL, {ENV_PREFIX}RESULT_REDIS_URL "
            f"or {ENV_PREFIX}SIDEKIQ_REDIS_URL); for a plain Redis over TLS use rediss://"
        )
    if values["cache_url"]:
        master = values["cache_sentinel_master"] or values["redis_sentinel_master"]
        check_redis_url(f"{ENV_PREFIX}CACHE_URL", values["cache_url"], master, f"{ENV_PREFIX}CACHE_SENTINEL_MASTER")
    if values["sidekiq_redis_url"] and urlsplit(values["sidekiq_redis_url"]).scheme == SENTINEL_SCHEME:
        check_sentinel_url(f"{ENV_PREFIX}SIDEKIQ_REDIS_URL", values["sidekiq_redis_url"])
        if not (values["sidekiq_redis_sentinel_master"] or values["redis_sentinel_master"]):
            raise ConfigError(
                f"{ENV_PREFIX}SIDEKIQ_REDIS_URL is a Sentinel URL: set {ENV_PREFIX}SIDEKIQ_REDIS_SENTINEL_MASTER"
            )


def check_relations(values: Mapping[str, Any]) -> None:
    """Rules between two settings."""
    if not 0 <= values["result_write_patience_s"] < values["soft_time_limit_s"]:
        raise ConfigError(
            f"{ENV_PREFIX}RESULT_WRITE_PATIENCE_S must be from 0 up to {ENV_PREFIX}SOFT_TIME_LIMIT_S "
            f"({values['soft_time_limit_s']}), got {values['result_write_patience_s']}"
        )
    if not values["soft_time_limit_s"] < values["time_limit_s"]:
        raise ConfigError(
            f"{ENV_PREFIX}SOFT_TIME_LIMIT_S ({values['soft_time_limit_s']}) must be below "
            f"{ENV_PREFIX}TIME_LIMIT_S ({values['time_limit_s']}): the soft limit warns the task first"
        )
    if not 0 < values["lease_renew_interval_s"] * 3 <= values["visibility_timeout_s"]:
        raise ConfigError(
            f"{ENV_PREFIX}LEASE_RENEW_INTERVAL_S ({values['lease_renew_interval_s']}) must be at most a third "
            f"of {ENV_PREFIX}VISIBILITY_TIMEOUT_S ({values['visibility_timeout_s']}), or a slow renewal lets "
            "Redis hand a running task to a second worker"
        )


def check_settings(values: Mapping[str, Any]) -> None:
    """Every rule, in order: the Redis URLs, each field's own rule, the extra task names, the relations."""
    check_redis(values)
    for name, allowed, problem in FIELD_RULES:
        value = values[name]
        if not allowed(value):
            raise ConfigError(f"{ENV_PREFIX}{name.upper()} {problem(value)}")
    for name in task_names(values["extra_tasks"]):
        if not TASK_NAME.match(name) or name.startswith(CELERY_BUILTIN_PREFIX):
            raise ConfigError(
                f"{ENV_PREFIX}EXTRA_TASKS: {name!r} is not a task name or 'prefix.*' "
                f"(names starting with {CELERY_BUILTIN_PREFIX!r}, Celery's built-in tasks, are never accepted)"
            )
    check_relations(values)


def task_names(extra_tasks: str | None) -> tuple[str, ...]:
    """INFERENCE_EXTRA_TASKS as a tuple of names and "prefix.*" patterns."""
    return tuple(name.strip() for name in (extra_tasks or "").split(",") if name.strip())


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_env_text(variable: str, raw: str, kind: type) -> object:
    """An environment variable's text as its setting's type (bool, int, float or str)."""
    text = raw.strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{variable}={raw!r} is not a boolean (use true/false)")
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{variable}={raw!r} is not a number") from None
    return text

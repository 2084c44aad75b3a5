"""create_app(settings) -> the Celery app; every Celery setting we choose, each with its reason."""

from __future__ import annotations

import os
import ssl
from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu.entity import Exchange, Queue

from inference_tasks.codec import RESULT_CONTENT_TYPE, RESULT_SERIALIZER, register_result_codec
from inference_tasks.config import Settings, load_settings
from inference_tasks.config.checks import ConfigError
from inference_tasks.ops.flower_guard import guard_flower
from inference_tasks.redis_access import sent_at
from inference_tasks.redis_access.connections import SENTINEL_TIMEOUT_S
from inference_tasks.redis_access.failover import NeverSwitchStrategy
from inference_tasks.redis_access.keys import UNACKED_INDEX_KEY, UNACKED_KEY, UNACKED_MUTEX_KEY
from inference_tasks.routing import (
    INFERENCE_QUEUE,
    PRIORITY_STEPS,
    PUBLIC_TASKS,
    TASK_ROUTES,
)
from inference_tasks.tracing import propagation
from inference_tasks.tracing.config import tracing_configured

APP_NAME = "inference_tasks"
RESULT_BACKEND_CLASS = "inference_tasks.broker.result_backend:ResultBackend"
SENTINEL_RESULT_BACKEND_CLASS = "inference_tasks.broker.result_backend:SentinelResultBackend"
# Imported by Celery's worker only (its loader imports `include` before sending worker_init): the
# worker lifecycle hooks first, then the task modules. Producers, Flower and the CLI import none.
TASK_MODULES = [
    "inference_tasks.worker.lifecycle.signals",
    "inference_tasks.worker.tasks.embedding",
    "inference_tasks.worker.tasks.retrieval",
    "inference_tasks.worker.tasks.sparse",
    "inference_tasks.worker.tasks.training",
    "inference_tasks.worker.tasks.info",
]
# Worker consumer bootsteps: lease renewal for the messages held, the micro-batcher's shutdown, task
# events published on a timer, and the state `inference-tasks probe` reads.
CONSUMER_STEPS = (
    "inference_tasks.broker.leases:LeaseRenewal",
    "inference_tasks.worker.batching.strategy:StopBatchingOnConsumerStop",
    "inference_tasks.worker.celery_ext.task_events:FlushTaskEventsOnATimer",
    "inference_tasks.worker.lifecycle.probe_state:WriteProbeState",
)
_CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def celery_conf(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for `settings`; Celery defaults apply to every key not here."""
    conf: dict[str, Any] = {
        "broker_url": settings.redis_url,
        # Never kombu's switch to the next part of a sentinel:// URL: it would replace our transport
        # with kombu's own (redis_access/failover.py).
        "broker_failover_strategy": NeverSwitchStrategy("never-switch"),
        # Celery's Redis backend, plus reply jobs from the stored outcome, per-task lifetimes and
        # retries while Redis is full (result_backend.py); "<class>+<url>" is Celery's own form.
        # On INFERENCE_RESULT_REDIS_URL when set (results are most of the bytes), else REDIS_URL.
        "result_backend": f"{RESULT_BACKEND_CLASS}+{settings.results_url}",
        # kombu's Redis transport plus screening of every raw message (envelope.py) and a bound
        # on redeliveries; the URL keeps its redis:// or rediss:// scheme.
        "broker_transport": "inference_tasks.broker.transport:Transport",
        "broker_transport_options": broker_transport_options(settings),
        # JSON only, in and out: a pickled message would run code chosen by whoever can
        # write to Redis. Messages in any other content type are rejected, never decoded.
        "accept_content": ["json"],
        # Results are plain JSON too, written and read with orjson (codec.py: big embeddings).
        "result_accept_content": ["json", RESULT_CONTENT_TYPE],
        "task_serializer": "json",
        "result_serializer": RESULT_SERIALIZER,
        "event_serializer": "json",
        # Only the served model's queues are declared (`inference` and `inference.<alias>` for the
        # default model, `inference.<alias>` for another), so a plain `celery -A inference_tasks worker`
        # serves its model and never pulls training work into pinned children; `-Q training` creates
        # that queue (task_create_missing_queues), with its own exchange and routing key like these.
        "task_queues": [Queue(name, Exchange(name), routing_key=name) for name in served_queues(settings)],
        "task_default_queue": INFERENCE_QUEUE,
        "task_routes": TASK_ROUTES,
        # Ack after the task ran, and requeue it if its child died: a killed child loses nothing.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # Each child reserves one task at a time: long batches never queue up behind a busy
        # child while a sibling idles, and a dying worker holds back at most one per child.
        "worker_prefetch_multiplier": 1,
        # Celery's consumer, except that whatever goes wrong while the main process handles one
        # message costs that message (dead-lettered, FAILURE), never the worker (worker/celery_ext/consumer.py).
        "worker_consumer": "inference_tasks.worker.celery_ext.consumer:Consumer",
        # Celery's prefork pool, except that it never writes a job to a child about to be
        # recycled (pool.py); `--pool prefork` on the command line selects it too.
        "worker_pool": "inference_tasks.worker.celery_ext.pool:TaskPool",
        "worker_concurrency": settings.concurrency,
        # Each child then draws its own limit at or below this one (recycling.py); 0 = never.
        "worker_max_tasks_per_child": settings.max_tasks_per_child or None,
        "worker_max_memory_per_child": settings.max_memory_per_child_mb * 1024,  # Celery wants KiB
        # Children load and warm the model before they report "up" (Celery's default is 4 s).
        "worker_proc_alive_timeout": settings.proc_alive_timeout_s,
        "task_soft_time_limit": settings.soft_time_limit_s,
        "task_time_limit": settings.time_limit_s,
        "result_expires": settings.result_expires_s,
        # A task's result write is retried through a Redis restart instead of being lost.
        "result_backend_always_retry": True,
        "result_backend_max_retries": 20,
        # STARTED is visible to pollers and Flower; events let Flower show tasks live
        # (INFERENCE_TASK_EVENTS: they cost Redis ~2.4 PUBLISH per task, and worker CPU).
        "task_track_started": True,
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": settings.task_events,
        "broker_connection_retry_on_startup": True,
        # With late acks, a task running when the broker connection drops cannot be acked any
        # more; cancelling it lets the redelivered copy be the only one that counts.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
    }
    conf.update(connection_conf(settings))
    return conf


def served_queues(settings: Settings) -> list[str]:
    """The queues of the model INFERENCE_MODEL names; `inference` alone while the catalogue cannot be
    read (a worker then refuses to start at worker_init, saying why: signals.py)."""
    try:
        return settings.catalogue.queues_of(settings.served_model.alias)
    except ConfigError:
        return [INFERENCE_QUEUE]


def broker_transport_options(settings: Settings) -> dict[str, Any]:
    """What our transport (broker/transport.py) and kombu's Redis channel read from the settings."""
    options: dict[str, Any] = {
        # An unacked message whose lease is older than this goes back to its queue; workers
        # renew the leases of what they hold (leases.py), and every worker sweeps for
        # expired ones every renewal interval (kombu's default is every ~100 s).
        "visibility_timeout": settings.visibility_timeout_s,
        "unacked_restore_interval": settings.lease_renew_interval_s,
        "unacked_restore_throttle": 1,
        # A worker killed while sweeping would otherwise block all sweeps for 5 minutes.
        "unacked_mutex_expire": settings.visibility_timeout_s,
        # kombu's own key names, stated so redis_access/keys.py is the one list of what we use.
        "unacked_key": UNACKED_KEY,
        "unacked_index_key": UNACKED_INDEX_KEY,
        "unacked_mutex_key": UNACKED_MUTEX_KEY,
        "max_message_bytes": settings.max_message_bytes,
        "max_nesting_depth": settings.max_nesting_depth,
        "max_argument_depth": settings.max_argument_depth,
        "max_message_items": settings.max_message_items,
        "max_eta_s": settings.max_eta_s,
        "accepted_tasks": [*PUBLIC_TASKS, *settings.extra_task_names],
        "max_redeliveries": settings.max_redeliveries,
        "trace_stamps": tracing_configured(os.environ),
        "wake_on_push": settings.wake_on_push,
        "dead_letter_max": settings.dead_letter_max,
        "dead_letter_ttl": settings.dead_letter_ttl_s,
        "durable_claim_ttl": settings.durable_claim_ttl_s,
        # One Redis list per priority 0-9 with readable names ("inference:3", named by our channel,
        # not by kombu's `sep`, which stays kombu's own for stock clients: broker/bindings.py), so
        # producers in other languages can push to a priority without kombu's "\x06\x16".
        "priority_steps": PRIORITY_STEPS,
        "queue_order_strategy": "priority",
    }
    if settings.uses_sentinel:
        options["master_name"] = settings.redis_sentinel_master
        if settings.redis_sentinel_tls:
            options["sentinel_kwargs"] = sentinel_tls_kwargs(settings)
    return options


def connection_conf(settings: Settings) -> dict[str, Any]:
    """Sentinel and TLS: the classes and options that depend on the schemes of REDIS_URL (the broker)
    and of the results' URL (INFERENCE_RESULT_REDIS_URL, else REDIS_URL), each on its own."""
    conf: dict[str, Any] = {}
    tls = tls_conf(settings)
    if settings.uses_sentinel:
        # kombu's Sentinel support under our transport: every connection asks the sentinels for the
        # current primary, and again after a failover.
        conf["broker_transport"] = "inference_tasks.broker.transport:SentinelTransport"
    if settings.results_use_sentinel:
        # The same on Celery's Sentinel backend, under our result store.
        conf["result_backend"] = f"{SENTINEL_RESULT_BACKEND_CLASS}+{settings.results_url}"
        options: dict[str, Any] = {"master_name": settings.results_sentinel_master}
        if settings.redis_sentinel_tls:
            options["sentinel_kwargs"] = sentinel_tls_kwargs(settings)
        conf["result_backend_transport_options"] = options
    broker_scheme, results_scheme = urlsplit(settings.redis_url).scheme, urlsplit(settings.results_url).scheme
    # TLS to the data nodes: rediss://, or a sentinel:// URL with INFERENCE_REDIS_SENTINEL_TLS (its
    # primary is then reached over TLS too; the sentinels themselves through sentinel_kwargs).
    if broker_scheme == "rediss" or (settings.uses_sentinel and settings.redis_sentinel_tls):
        conf["broker_use_ssl"] = tls
    if results_scheme == "rediss" or (settings.results_use_sentinel and settings.redis_sentinel_tls):
        conf["redis_backend_use_ssl"] = tls
    return conf


def tls_conf(settings: Settings) -> dict[str, Any]:
    """The certificate check and CA of every TLS connection (Celery's and kombu's key names)."""
    tls: dict[str, Any] = {"ssl_cert_reqs": _CERT_REQS[settings.redis_tls_cert_reqs]}
    if settings.redis_tls_ca_file:
        tls["ssl_ca_certs"] = settings.redis_tls_ca_file
    return tls


def sentinel_tls_kwargs(settings: Settings) -> dict[str, Any]:
    """How kombu and Celery reach the sentinels themselves over TLS (redis-py's Sentinel(sentinel_kwargs=)):
    given, they replace the socket options it would copy from the data connection, so those are here."""
    return {"ssl": True, "socket_timeout": SENTINEL_TIMEOUT_S, "socket_connect_timeout": SENTINEL_TIMEOUT_S,
            **tls_conf(settings)}  # fmt: skip


class InferenceApp(Celery):
    """A Celery app that carries its Settings; without explicit ones, reads the environment lazily."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        register_result_codec()
        super().__init__(APP_NAME, include=TASK_MODULES)
        # A callable default is evaluated on first use of app.conf, not at import time.
        self.add_defaults(lambda: celery_conf(self.settings))
        # Named, not imported: Celery's blueprint imports a step when a worker starts, so a producer
        # that imports this app never loads worker code.
        for step in CONSUMER_STEPS:
            self.steps["consumer"].add(step)
        guard_flower(self)
        sent_at.connect()
        propagation.connect()

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings


def is_inference_app(app: Any) -> bool:
    """Whether `app` (a Celery app, or the current_app proxy) is this package's app: the worker hooks
    (signals.py) act only for it, Celery's signals being process-wide. isinstance sees through the
    proxy (Celery's Proxy answers `__class__` with its object's class)."""
    return isinstance(app, InferenceApp)


def create_app(settings: Settings | None = None) -> InferenceApp:
    """A configured app; producers and tests pass Settings, workers let it read the environment."""
    return InferenceApp(settings)


app = create_app()

"""Every Redis key this project reads or writes, named in one place.

An operator sizing or inspecting Redis (docs/operations.md) and anyone writing a producer in
another language reads this list; the Ruby client (deploy/rails/lib) uses the same names.
Producer-safe: imports only routing.
"""

from __future__ import annotations

from inference_tasks.routing import PRIORITY_SEPARATOR, PRIORITY_STEPS

KEY_PREFIX = "inference-tasks"

# --- Ours -----------------------------------------------------------------------------------
# Messages refused by screening or redelivered too often (broker/transport.py), newest first.
DEAD_LETTER_KEY = f"{KEY_PREFIX}:dead-letter"
# Per task id: how often its message was handed out (bounded redelivery, broker/transport.py).
REDELIVERY_KEY_PREFIX = f"{KEY_PREFIX}:redeliveries:"
# Durable enqueue (redis_access/durable.py): the key a durable push writes after its message, so that
# WAIT on the same connection pool covers the push; and per durable task id the delivery tag of
# the first message a worker took with that id (a producer's retry after NotReplicated may have
# pushed a second one: broker/transport.py runs only the first).
DURABLE_FENCE_KEY = f"{KEY_PREFIX}:durable-fence"
DURABLE_CLAIM_KEY_PREFIX = f"{KEY_PREFIX}:durable-claims:"
# A key that never holds anything: a consumer whose take Redis refused (full) waits on it, server-side,
# before taking again (broker/fetch.py).
FETCH_RETRY_KEY = f"{KEY_PREFIX}:fetch-retry"
# An idle consumer's doorbell (broker/wakeup.py): rung when one of its lists is written.
DOORBELL_KEY_PREFIX = f"{KEY_PREFIX}:doorbell:"
# Where Redis' client-side tracking sends its notices to a RESP2 connection (broker/wakeup.py).
INVALIDATE_CHANNEL = "__redis__:invalidate"
# kombu's pub/sub channel for Celery's remote-control broadcasts in database `db` (its fanout prefix
# "/<db>." and the mailbox's exchange "celery.pidbox"): every worker's main process listens on it.
CONTROL_BROADCAST_CHANNEL = "/{db}.celery.pidbox"
# Recent task failures for `inference-tasks status` (redis_access/queue_state.py).
RECENT_FAILURES_KEY = f"{KEY_PREFIX}:recent-failures"
# Trained classifier heads (ml/store.py): the set of names, then per name a version counter,
# every version, and `latest`.
CLASSIFIER_NAMES_KEY = f"{KEY_PREFIX}:classifiers"
# The embedding cache's entries (worker/cache/), on INFERENCE_CACHE_URL's Redis only: one per text,
# `<prefix><space digest>:<text digest>`; the cache's ACL user is limited to this prefix.
CACHE_KEY_PREFIX = f"{KEY_PREFIX}:cache:"
# The gateway's tenants (gateway/limits.py, lua/tenant_limits.lua): per tenant its limit buckets and its
# requests in flight; per UTC hour one usage hash, "<tenant>|<model>|<what>" -> count, kept USAGE_TTL_S.
TENANT_KEY_PREFIX = f"{KEY_PREFIX}:tenant:"
USAGE_KEY_PREFIX = f"{KEY_PREFIX}:usage:"
USAGE_HOUR_FORMAT = "%Y%m%d%H"
USAGE_TTL_S = 35 * 24 * 3600


def redelivery_key(task_id: str) -> str:
    return f"{REDELIVERY_KEY_PREFIX}{task_id}"


def durable_claim_key(task_id: str) -> str:
    return f"{DURABLE_CLAIM_KEY_PREFIX}{task_id}"


def classifier_key(name: str, suffix: str) -> str:
    """`suffix` is `counter`, `latest` or `v<version>`."""
    return f"{KEY_PREFIX}:classifier:{name}:{suffix}"


def tenant_keys(tenant: str) -> tuple[str, str]:
    """A tenant's limit buckets (a hash) and its requests in flight (a sorted set)."""
    return f"{TENANT_KEY_PREFIX}{tenant}:buckets", f"{TENANT_KEY_PREFIX}{tenant}:in-flight"


def usage_key(hour: str) -> str:
    """The usage hash of one UTC hour, `hour` as USAGE_HOUR_FORMAT writes it (2026120801)."""
    return f"{USAGE_KEY_PREFIX}{hour}"


def corpus_page_key(job_id: str, page: int | str) -> str:
    """One page of an embed_corpus job's vectors (worker/tasks/training.py)."""
    return f"{KEY_PREFIX}:corpus:{job_id}:{page}"


# --- kombu's Redis transport (we screen, renew and count them) ------------------------------
# Messages handed to a worker and not yet acked, by delivery tag; their delivery times (the
# lease, renewed by broker/leases.py) in the index; the sweep's mutex.
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"
UNACKED_MUTEX_KEY = "unacked_mutex"


def priority_list_key(queue: str, step: int) -> str:
    """The Redis list holding `queue`'s messages of priority `step` (kombu's naming, with our readable
    separator: "inference:3"); `queue` itself for priority 0. The worker's channel takes from these."""
    return queue if step == 0 else f"{queue}{PRIORITY_SEPARATOR}{step}"


def queue_keys(queue: str) -> list[str]:
    """The Redis list keys that hold a queue's waiting messages, highest priority first."""
    return [priority_list_key(queue, step) for step in PRIORITY_STEPS]


# --- Celery's result backend ----------------------------------------------------------------
RESULT_KEY_PREFIX = "celery-task-meta-"


def result_key(task_id: str) -> str:
    return f"{RESULT_KEY_PREFIX}{task_id}"


# --- Sidekiq's (reply jobs, broker/replies.py) ----------------------------------------------
SIDEKIQ_QUEUES_KEY = "queues"


def sidekiq_queue_key(queue: str) -> str:
    return f"queue:{queue}"

"""`inference-tasks acl`: a Redis ACL file (the `aclfile` format) with one least-privilege user per role.

With one shared password anyone holding it can FLUSHALL, rewrite trained heads, read the unacked
records or push to the training queue. Redis 6+ ACL users limit each client to the keys, channels
and commands its role needs:

- inference-producer: push to the inference queues, read and delete results (and their pub/sub
  channels), the durable fence, queue depths; never the training queues (unless --producer-trains),
  heads, unacked records, dead letters or admin commands;
- inference-worker: the queues (its own, and the others its visibility sweep may put a message back
  on), kombu's unacked record and bindings, results, events and remote control, our dead letters,
  redelivery counts, durable claims and recent failures, heads read-only, Sidekiq reply queues;
- inference-trainer: the worker's, plus the training queues, writing heads and corpus pages, and
  reading corpus sources (`inference-tasks:sources:*`);
- inference-operator (Flower, the exporter, doctor, status): reads dead letters, results, heads and
  INFO/CONFIG GET; sends remote-control broadcasts and reads their replies; follows events; writes the
  unacked record and the queues only as kombu's visibility sweep, which every kombu consumer runs;
- inference-gateway (`inference-tasks gateway`): the producer's rights on the inference queues and results,
  its tenants' limits and usage keys, plus what /health's broadcast needs (the remote-control channel, its
  reply queues, kombu's bindings),
  and the unacked record and queues as kombu's visibility sweep, as the operator;
- inference-cache, for the embedding cache's own Redis (INFERENCE_CACHE_URL; load the same file there):
  MGET, GET and SET on the cache's key prefix only, and what doctor and status read (INFO, CONFIG GET,
  DBSIZE); no other key, no pub/sub, no admin command.

Passwords come from INFERENCE_ACL_PASSWORD_PRODUCER / _WORKER / _TRAINER / _OPERATOR / _GATEWAY / _CACHE, else are
generated; the file holds only their SHA-256, and generated ones are printed once, on stderr.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from inference_tasks.redis_access.keys import (
    CACHE_KEY_PREFIX,
    CLASSIFIER_NAMES_KEY,
    CONTROL_BROADCAST_CHANNEL,
    DEAD_LETTER_KEY,
    DOORBELL_KEY_PREFIX,
    DURABLE_CLAIM_KEY_PREFIX,
    DURABLE_FENCE_KEY,
    FETCH_RETRY_KEY,
    INVALIDATE_CHANNEL,
    KEY_PREFIX,
    RECENT_FAILURES_KEY,
    REDELIVERY_KEY_PREFIX,
    RESULT_KEY_PREFIX,
    SIDEKIQ_QUEUES_KEY,
    TENANT_KEY_PREFIX,
    UNACKED_INDEX_KEY,
    UNACKED_KEY,
    UNACKED_MUTEX_KEY,
    USAGE_KEY_PREFIX,
)
from inference_tasks.routing import INFERENCE_QUEUE, PRIORITY_SEPARATOR, TRAINING_QUEUE

ROLES = ("producer", "worker", "trainer", "operator", "gateway", "cache")
PASSWORD_VARIABLE = "INFERENCE_ACL_PASSWORD_{}"
# Corpus sources (inference.embed_corpus's source_key) under ACLs: lists the producer writes and the
# trainer reads.
SOURCES_PATTERN = f"{KEY_PREFIX}:sources:*"

# Connection housekeeping every client needs (AUTH is always allowed).
CONNECTION = "+ping +select +hello +echo +client|setname +client|getname +client|id +readonly"
# Plain data commands on the keys a role may touch; the dangerous ones (FLUSHALL, CONFIG, KEYS,
# DEBUG, MIGRATE, ...) never.
DATA = "+@read +@write +@scripting +@transaction +@pubsub +wait +time -@dangerous"


def queue_patterns(queue: str) -> list[str]:
    """A queue's lists: the queue, its priority lists and its per-model queues (and theirs)."""
    return [queue, f"{queue}{PRIORITY_SEPARATOR}*", f"{queue}.*"]


def keys(*patterns: str, read_only: tuple[str, ...] = ()) -> str:
    return " ".join([*(f"~{pattern}" for pattern in patterns), *(f"%R~{pattern}" for pattern in read_only)])


def channels(*patterns: str) -> str:
    return " ".join(f"&{pattern}" for pattern in patterns)


RESULTS = (f"{RESULT_KEY_PREFIX}*",)
BINDINGS = ("_kombu.binding*",)


def events_and_control(db: int) -> tuple[str, ...]:
    """kombu's fanout exchanges over pub/sub in database `db`: task events and remote-control
    broadcasts. Subscribers PSUBSCRIBE these exact patterns, and Redis allows a PSUBSCRIBE only to
    a pattern granted literally, so they are spelled per database."""
    return (f"/{db}.celeryev/*", CONTROL_BROADCAST_CHANNEL.format(db=db))


CONTROL_REPLIES = ("*.reply.celery.pidbox*",)
# An event receiver's own queue (Flower, the exporter, and every worker's gossip, on by default in a
# plain `celery worker`): "celeryev.<uuid>" and its priority lists.
EVENT_QUEUES = ("celeryev.*",)


def gossip(db: int) -> tuple[str, ...]:
    """The pattern a worker's gossip PSUBSCRIBEs to (Celery's routing key `worker.#`, which kombu
    subscribes to as `worker.*`), spelled literally as Redis requires of a pattern subscription."""
    return (f"/{db}.celeryev/worker.*",)


# A worker's own remote-control queue ("<node>.celery.pidbox") and the replies it writes.
CONTROL_QUEUES = ("*.celery.pidbox*",)
UNACKED = (UNACKED_KEY, UNACKED_INDEX_KEY, UNACKED_MUTEX_KEY)
WORKER_RECORDS = (
    DEAD_LETTER_KEY, f"{REDELIVERY_KEY_PREFIX}*", f"{DURABLE_CLAIM_KEY_PREFIX}*", RECENT_FAILURES_KEY, FETCH_RETRY_KEY,
    f"{DOORBELL_KEY_PREFIX}*",
)  # fmt: skip
# The gateway's tenants: their limit buckets and requests in flight, and the hourly usage (`inference-tasks usage`
# reads it as the operator).
TENANTS = (f"{TENANT_KEY_PREFIX}*", f"{USAGE_KEY_PREFIX}*")
# Waking an idle consumer (broker/wakeup.py): client-side tracking, its notices' channel.
WAKEUP = "+client|tracking"
HEADS = (CLASSIFIER_NAMES_KEY, f"{KEY_PREFIX}:classifier:*")
SIDEKIQ = ("queue:*", SIDEKIQ_QUEUES_KEY)
# The embedding cache's user: a batch's entries read (MGET) and written (SET ... EX, pipelined), and what
# doctor and status read of that server.
CACHE_COMMANDS = "+mget +get +set +info +config|get +dbsize"


def role_rules(role: str, producer_trains: bool = False, db: int = 0) -> str:
    """The ACL rules (after the user's name, state and password) of one role."""
    inference, training = queue_patterns(INFERENCE_QUEUE), queue_patterns(TRAINING_QUEUE)
    fanout = events_and_control(db)
    if role == "producer":
        pushed = [*inference, *(training if producer_trains else [])]
        return " ".join([
            DATA, CONNECTION, keys(*pushed, *RESULTS, *BINDINGS, DURABLE_FENCE_KEY, SOURCES_PATTERN),
            channels(*RESULTS),
        ])  # fmt: skip
    # The training queues too: a worker's visibility sweep puts any expired message back on its queue.
    # Gossip's event queue too: a plain `celery worker` (no --without-gossip) declares one at start.
    worker_keys = [
        *inference, *training, *RESULTS, *BINDINGS, *UNACKED, *WORKER_RECORDS, *CONTROL_QUEUES, *SIDEKIQ, *EVENT_QUEUES,
    ]  # fmt: skip
    if role == "worker":
        return " ".join([
            DATA, CONNECTION, WAKEUP, keys(*worker_keys, read_only=HEADS),
            channels(*RESULTS, *fanout, *gossip(db), INVALIDATE_CHANNEL),
        ])  # fmt: skip
    if role == "trainer":
        return " ".join([
            DATA, CONNECTION, WAKEUP,
            keys(*worker_keys, *HEADS, f"{KEY_PREFIX}:corpus:*", read_only=(SOURCES_PATTERN,)),
            channels(*RESULTS, *fanout, *gossip(db), INVALIDATE_CHANNEL),
        ])  # fmt: skip
    if role == "gateway":
        # /health's broadcast runs a kombu consumer, whose visibility sweep writes the unacked record and
        # may put an expired message back on its queue (a training one too), as the operator's.
        return " ".join([
            DATA, CONNECTION,
            keys(*inference, *training, *RESULTS, *BINDINGS, *CONTROL_REPLIES, *UNACKED, *TENANTS),
            channels(*RESULTS, *fanout),
        ])  # fmt: skip
    if role == "cache":
        return " ".join([CONNECTION, CACHE_COMMANDS, keys(f"{CACHE_KEY_PREFIX}*")])
    if role == "operator":
        return " ".join([
            # Writes only where keys allow: its remote-control reply queues, its event queue, kombu's
            # bindings (declared through kombu's Lua scripts), and the unacked record and queues:
            # every kombu consumer, Flower's and the exporter's too, runs the visibility sweep that
            # puts expired messages back. Dead letters, results, heads: read-only.
            DATA, CONNECTION, "+info +config|get +memory|usage +client|list +slowlog|get",
            keys(*CONTROL_REPLIES, *BINDINGS, *EVENT_QUEUES, *UNACKED, *inference, *training,
                 read_only=(*WORKER_RECORDS, *RESULTS, *HEADS, *SIDEKIQ, *TENANTS)),
            channels(*fanout, *RESULTS),
        ])  # fmt: skip
    raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")


@dataclass(frozen=True)
class AclFile:
    text: str
    generated: dict[str, str]  # role -> password, for the roles whose password was generated


def acl_file(environment: Mapping[str, str], producer_trains: bool = False, db: int = 0) -> AclFile:
    """The ACL file's text: the default user off (add your own admin user), then one user per role."""
    lines = ["user default off"]  # the format has no comments: how to load it is in docs/operations.md
    generated = {}
    for role in ROLES:
        password = environment.get(PASSWORD_VARIABLE.format(role.upper()))
        if not password:
            password = generated[role] = secrets.token_urlsafe(24)
        digest = hashlib.sha256(password.encode()).hexdigest()
        lines.append(f"user inference-{role} on #{digest} resetkeys resetchannels -@all "
                     f"{role_rules(role, producer_trains, db)}")  # fmt: skip
    return AclFile("\n".join(lines) + "\n", generated)

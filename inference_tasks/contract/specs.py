"""Every public task's arguments: one `TaskSpec` each, the single description the worker parses against,
the micro-batch planner reads, docs/tasks.md renders and the tests hold both clients to.

Adding an argument: a line here, the code that executes it (worker/tasks/), and the Ruby client.
"""

from __future__ import annotations

from inference_tasks.contract import rules
from inference_tasks.contract.spec import Argument, TaskSpec
from inference_tasks.routing import (
    CLASSIFY_TASK,
    CORPUS_ENCODINGS,
    EMBED_CHUNKS_TASK,
    EMBED_CORPUS_TASK,
    EMBED_ENCODINGS,
    EMBED_SPARSE_TASK,
    EMBED_TASK,
    F32_BASE64_ENCODING,
    JSON_ENCODING,
    RERANK_TASK,
    TRAIN_CLASSIFIER_TASK,
    WORKER_INFO_TASK,
)

DEFAULT_OVERLAP_TOKENS = 32
DEFAULT_PAGE_SIZE = 256
MAX_PAGE_SIZE = 2048


def _texts(doc: str = "the texts, each embedded as the model reads it", **limits: str) -> Argument:
    return Argument("texts", "[str]", rules.texts(**limits), doc, required=True)


def _normalize() -> Argument:
    return Argument("normalize", "bool", rules.flag(), "unit-length vectors", default=True)


def _encoding(default: str = JSON_ENCODING, choices: tuple[str, ...] = EMBED_ENCODINGS) -> Argument:
    return Argument(
        "encoding", "str", rules.encoding(choices), "how vectors are written (docs/tasks.md, quantized vectors)",
        default=default,
    )  # fmt: skip


def _model() -> Argument:
    return Argument(
        "model", "str or null", rules.model(), "the catalogue alias asked for; never answered by another model",
        positional=False,
    )  # fmt: skip


def _prompts() -> tuple[Argument, ...]:
    return (
        Argument("prompt_name", "str or null", rules.prompt_name(), "a named prompt of the model", positional=False),
        Argument("prompt", "str or null", rules.prompt(), "a literal prefix (default: the model's default prompt)",
                 positional=False),
    )  # fmt: skip


def _dimensions() -> Argument:
    return Argument(
        "dimensions", "int or null", rules.dimensions(),
        "the first N components (Matryoshka), renormalized when normalize", positional=False,
    )  # fmt: skip


def _truncate(positional: bool = False) -> Argument:
    return Argument(
        "truncate", "bool", rules.flag(), "cut a text over the model's token limit (false: fail the task)",
        default=True, positional=positional,
    )  # fmt: skip


def _cache_flag() -> Argument:
    return Argument(
        "cache", "bool", rules.flag(),
        "read and write the fleet's embedding cache where the worker has one (false: compute every text, store none)",
        default=True, positional=False,
    )  # fmt: skip


EMBED = TaskSpec(
    EMBED_TASK,
    (_texts(), _normalize(), _encoding(), _model(), *_prompts(), _dimensions(), _truncate(), _cache_flag()),
)
CLASSIFY = TaskSpec(
    CLASSIFY_TASK,
    (
        _texts("the texts to label"),
        Argument("labels", "[str] or null", rules.optional(rules.labels()), "zero-shot: the labels to choose from"),
        Argument(
            "classifier", "str or null", rules.optional(rules.name()),
            "a trained head (inference.train_classifier) instead of labels",
        ),
        Argument(
            "classifier_version", "int or null", rules.optional(rules.count(1)),
            "the head's version (null: its latest); needs classifier",
        ),
        _model(),
        _truncate(),
        _cache_flag(),
    ),
)  # fmt: skip
RERANK = TaskSpec(
    RERANK_TASK,
    (
        Argument("query", "str", rules.text(), "what the documents are ordered by", required=True),
        Argument("documents", "[str]", rules.texts(), "the documents to order", required=True),
        Argument("top_n", "int or null", rules.optional(rules.count(1)), "return only the best n (null: all)"),
        Argument("return_documents", "bool", rules.flag(), "each result carries its document", default=False),
        _model(),
        _truncate(),
        _cache_flag(),
    ),
)  # fmt: skip
EMBED_CHUNKS = TaskSpec(
    EMBED_CHUNKS_TASK,
    (
        _texts("the long texts to split and embed", chars_limit="max_document_chars"),
        Argument(
            "chunk_tokens", "int or null",
            rules.at_execution("null, or a whole number from 1 to the model's token limit"),
            "word pieces per window, special tokens and prompt included (null: the model's limit)",
        ),
        Argument(
            "overlap_tokens", "int", rules.at_execution("a whole number from 0 to below the window's text room"),
            "word pieces shared by neighbouring windows", default=DEFAULT_OVERLAP_TOKENS,
        ),
        _normalize(),
        _encoding(),
        *_prompts(),
        _dimensions(),
        _model(),
        _cache_flag(),
    ),
)  # fmt: skip
EMBED_SPARSE = TaskSpec(
    EMBED_SPARSE_TASK,
    (
        _texts(),
        Argument(
            "top_k", "int or null", rules.at_execution("null, or a whole number from 1 to the vocabulary's size"),
            "keep only the k largest weights of each text (null: all)", positional=False,
        ),
        Argument(
            "min_weight", "float", rules.weight(), "drop weights below it (0: keep every non-zero one)", default=0,
            positional=False,
        ),
        Argument(
            "return_tokens", "bool", rules.flag(), "each index's vocabulary word piece too", default=False,
            positional=False,
        ),
        _model(),
        *_prompts(),
        _truncate(),
        _cache_flag(),
    ),
)  # fmt: skip
TRAIN_CLASSIFIER = TaskSpec(
    TRAIN_CLASSIFIER_TASK,
    (
        Argument("name", "str", rules.name(), "the head's name; each training stores its next version", required=True),
        _texts("the labelled examples", count_limit="max_train_texts"),
        Argument(
            "labels", "[str]",
            rules.at_execution(
                "one non-blank string per text, 2 to INFERENCE_MAX_LABELS distinct, each with "
                "INFERENCE_MIN_EXAMPLES_PER_LABEL examples"
            ),
            "each text's label", required=True,
        ),
        Argument("test_fraction", "float", rules.fraction(0.0, 0.9), "held out to measure accuracy", default=0.2),
        Argument("seed", "int", rules.count(0), "the split's random seed", default=0),
        _model(),
    ),
)  # fmt: skip
EMBED_CORPUS = TaskSpec(
    EMBED_CORPUS_TASK,
    (
        Argument(
            "texts", "[str] or null", rules.optional(rules.texts(count_limit="max_corpus_texts")),
            "the corpus (bounded by the message size); or source_key",
        ),
        Argument(
            "source_key", "str or null",
            rules.at_execution("null, or a Redis list of 1 to INFERENCE_MAX_CORPUS_TEXTS texts"),
            "a Redis list holding the corpus, read page by page; or texts",
        ),
        Argument("page_size", "int", rules.count(1, MAX_PAGE_SIZE), "texts per stored page", default=DEFAULT_PAGE_SIZE),
        _normalize(),
        # Pages hold little-endian float32 vectors, base64-encoded, by default: 4x smaller in Redis than
        # JSON numbers (a 200k-text corpus is ~300 MB instead of ~1.5 GB) and ~100x cheaper to write,
        # which matters because serialising is serial work next to the multi-threaded model.
        _encoding(F32_BASE64_ENCODING, CORPUS_ENCODINGS),
        _model(),
    ),
)  # fmt: skip
WORKER_INFO = TaskSpec(WORKER_INFO_TASK, ())

SPECS = {
    spec.task: spec
    for spec in (EMBED, CLASSIFY, RERANK, EMBED_CHUNKS, EMBED_SPARSE, TRAIN_CLASSIFIER, EMBED_CORPUS, WORKER_INFO)
}

"""The retrieval tasks: rerank candidates for a query, and embed long documents in chunks.

Both follow the request contract of inference.embed (model by alias, usage on the result, bad
arguments failing with the argument named) and run on the model's inference queue.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from inference_tasks.contract.options import document_prompt, encode_options, query_prompt
from inference_tasks.contract.specs import EMBED_CHUNKS, RERANK
from inference_tasks.routing import EMBED_CHUNKS_TASK, RERANK_TASK
from inference_tasks.validation import InvalidInput, check_count
from inference_tasks.worker.batching.strategy import CoalescedTask
from inference_tasks.worker.celery_ext.request import GuardedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.capabilities import DenseEncoder, SpanTokenizer
from inference_tasks.worker.tasks import chunking
from inference_tasks.worker.tasks.steps import (
    EXPECTED_ERRORS,
    note_tokens,
    read_tokens,
    vectors_as_asked,
)
from inference_tasks.worker.tasks.usage import TaskClock, TokenCount, count_tokens

BI_ENCODER = "bi-encoder"
CROSS_ENCODER = "cross-encoder"


@shared_task(name=RERANK_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def rerank(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Order `documents` by relevance to `query` (contract/specs.py's RERANK): {"model", "alias", "method",
    "results": [{"index", "score", "relevance_score" (the same number), "document"?}] best first (the
    first `top_n`), "usage"}.

    A cross-encoder model (catalogue kind "cross-encoder") scores each (query, document) pair
    ("method": "cross-encoder"); an embedding model compares vectors ("bi-encoder": the cosine of
    the query's and the document's, with the model's query and passage prompts where it has them).
    """
    clock = TaskClock.start(self.request)
    settings = self.app.settings
    request = RERANK.parse(args, kwargs, settings)
    query, documents, alias, truncate = request["query"], request["documents"], request["model"], request["truncate"]
    holder = current().model
    scorer = holder.pair_scorer()
    if scorer is not None:
        counts = scorer.pair_token_counts(query, documents)
        count = count_tokens(RERANK_TASK, counts, scorer.max_tokens, truncate, "documents")
        scores = holder.score_for(scorer, self.request.id, query, documents).tolist()
        method, name = CROSS_ENCODER, scorer.name
    else:
        encoder = holder.dense(RERANK_TASK, alias)
        entry = settings.served_model
        read_query = query_prompt(entry) + query
        read_documents = [document_prompt(entry) + document for document in documents]
        count = read_tokens(RERANK_TASK, encoder, [read_query], truncate, "query")
        count.add(read_tokens(RERANK_TASK, encoder, read_documents, truncate, "documents"))
        vectors = holder.encode_for(self.request.id, [read_query, *read_documents], True, request["cache"])
        scores = (vectors[1:] @ vectors[0]).tolist()
        method, name = BI_ENCODER, encoder.name
    order = sorted(range(len(documents)), key=lambda index: (-scores[index], index))[: request["top_n"]]
    # "relevance_score": Cohere's and Jina's name for the same number, so clients written for them read it.
    results = [
        {"index": index, "score": scores[index], "relevance_score": scores[index]}
        | ({"document": documents[index]} if request["return_documents"] else {})
        for index in order
    ]
    usage = clock.usage(count, holder.shared, holder.cached)
    note_tokens(count)
    return {"model": name, "alias": alias, "method": method, "results": results, "usage": usage}


@shared_task(name=EMBED_CHUNKS_TASK, bind=True, base=GuardedTask, throws=EXPECTED_ERRORS)
def embed_chunks(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Split each text into windows of at most `chunk_tokens` word pieces (default: all the model reads),
    `overlap_tokens` shared between neighbours, and embed every window (contract/specs.py's EMBED_CHUNKS):
    {"model", "alias", "revision", "dim", "encoding", "chunks": [[{"start", "end", "embedding"}] per text], "usage"};
    [start, end) is the window's character span in its text. `encoding` applies to each chunk's vector
    (a packed one is a base64 string of that vector alone).
    """
    clock = TaskClock.start(self.request)
    settings = self.app.settings
    request = EMBED_CHUNKS.parse(args, kwargs, settings)
    texts, alias = request["texts"], request["model"]
    holder = current().model
    encoder = holder.dense(EMBED_CHUNKS_TASK, alias)
    options = encode_options(EMBED_CHUNKS_TASK, settings.served_model, request, encoder.dim)
    room, overlap = _window(encoder, alias, options.prompt, request["chunk_tokens"], request["overlap_tokens"])
    if not isinstance(encoder, SpanTokenizer):
        raise InvalidInput(
            f"{EMBED_CHUNKS_TASK}: model {alias!r} cannot be chunked: its tokenizer reports no character offsets"
        )
    text_spans = [chunking.spans(encoder.token_spans(text), room, overlap) for text in texts]
    owners = [index for index, found in enumerate(text_spans) for _ in found]
    read = options.prompted([text[start:end] for text, found in zip(texts, text_spans, strict=True)
                             for start, end in found])  # fmt: skip
    count = read_tokens(EMBED_CHUNKS_TASK, encoder, read, True) if read else TokenCount()
    count.truncated = sorted({owners[index] for index in count.truncated})
    vectors = holder.encode_for(None, read, options.normalize, request["cache"]) if read else None
    chunks: list[list[dict[str, Any]]] = []
    result: dict[str, Any] = {"model": encoder.name, "alias": alias, "revision": holder.revision, "dim": 0,
                              "encoding": options.encoding}  # fmt: skip
    rows = vectors_as_asked(holder, settings, vectors, options) if vectors is not None else None
    result["dim"] = rows["dim"] if rows else options.dimensions or encoder.dim
    embeddings = _per_chunk(rows, len(read)) if rows else []
    position = 0
    for found in text_spans:
        chunks.append(
            [
                {"start": start, "end": end, "embedding": embeddings[position + offset]}
                for offset, (start, end) in enumerate(found)
            ]
        )
        position += len(found)
    result["chunks"] = chunks
    result["usage"] = clock.usage(count, None, holder.cached if read else 0)
    note_tokens(count)
    return result


def _window(encoder: DenseEncoder, alias: str, prompt: str, chunk_tokens: Any, overlap_tokens: Any) -> tuple[int, int]:
    """The word pieces of text a window holds (chunk_tokens less the model's special tokens and the
    prompt's) and how many neighbours share; a wrong chunk_tokens or overlap_tokens fails the task."""
    limit = encoder.max_tokens
    if limit is None:
        raise InvalidInput(
            f"{EMBED_CHUNKS_TASK}: model {alias!r} reads texts of any length; send them to inference.embed whole"
        )
    size = limit if chunk_tokens is None else check_count(EMBED_CHUNKS_TASK, "chunk_tokens", chunk_tokens, 1, limit)
    room = size - encoder.special_tokens() - encoder.prefix_tokens(prompt)
    if room < 1:
        raise InvalidInput(
            f"{EMBED_CHUNKS_TASK}: chunk_tokens {size} leaves no room for text after the model's special tokens "
            "and the prompt; ask for more"
        )
    return room, check_count(EMBED_CHUNKS_TASK, "overlap_tokens", overlap_tokens, 0, room - 1)


def _per_chunk(rows: dict[str, Any], count: int) -> list[Any]:
    """One embedding per chunk: a list of floats, or that vector's own base64 bytes for a packed encoding."""
    import base64

    if "encoding" not in rows:
        return list(rows["embeddings"])
    raw = base64.b64decode(rows["embeddings"])
    width = len(raw) // count
    return [base64.b64encode(raw[index * width : (index + 1) * width]).decode() for index in range(count)]

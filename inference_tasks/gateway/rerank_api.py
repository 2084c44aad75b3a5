"""`POST /v1/rerank` in the Cohere/Jina shape that TEI, Infinity and vLLM serve: one inference.rerank task
(a cross-encoder's scores, or a bi-encoder's cosines), results best first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks.config import Settings
from inference_tasks.config.catalogue import KIND_MAX_BATCH_TEXTS, ModelEntry
from inference_tasks.gateway.errors import bad_request
from inference_tasks.validation import InvalidInput, check_texts

ROUTE = "POST /v1/rerank"


@dataclass(frozen=True)
class RerankRequest:
    query: str
    documents: list[str]
    top_n: int | None
    return_documents: bool

    def task_args(self) -> list[Any]:
        return [self.query, self.documents]

    def task_kwargs(self) -> dict[str, Any]:
        return {"return_documents": False} | ({"top_n": self.top_n} if self.top_n is not None else {})


def parse(body: dict[str, Any], entry: ModelEntry, settings: Settings) -> RerankRequest:
    """query (a string), documents (strings, or {"text": ...} objects), top_n, return_documents (default false)."""
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise bad_request("query must be a non-blank string", "query")
    documents = body.get("documents")
    if isinstance(documents, list):
        documents = [item["text"] if isinstance(item, dict) and "text" in item else item for item in documents]
    limit = entry.max_batch_texts or KIND_MAX_BATCH_TEXTS.get(entry.kind, settings.max_batch_texts)
    _checked([query], settings, 1, "query")
    checked = _checked(documents, settings, limit, "documents")
    top_n = body.get("top_n")
    if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1):
        raise bad_request(f"top_n must be a whole number of 1 or more, got {str(top_n)[:40]!r}", "top_n")
    return_documents = body.get("return_documents", False)
    if not isinstance(return_documents, bool):
        raise bad_request(f"return_documents must be true or false, got {str(return_documents)[:40]!r}",
                          "return_documents")  # fmt: skip
    return RerankRequest(query, checked, top_n, return_documents)


def _checked(texts: Any, settings: Settings, limit: int, name: str) -> list[str]:
    try:
        return check_texts(ROUTE, texts, settings, limit, name=name)
    except InvalidInput as error:
        raise bad_request(str(error), name) from None


def response(result: dict[str, Any], request: RerankRequest, model: str) -> dict[str, Any]:
    """{"object": "rerank", "model", "results": [{"index", "relevance_score", "document"?: {"text"}}], "usage"}."""
    results = []
    for found in result["results"]:
        item: dict[str, Any] = {"index": found["index"], "relevance_score": found["relevance_score"]}
        if request.return_documents:
            item["document"] = {"text": request.documents[found["index"]]}
        results.append(item)
    tokens = int(result.get("usage", {}).get("tokens", 0))
    return {"object": "rerank", "model": model, "results": results,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip

"""LlamaIndex: `InferenceTasksEmbedding`, llama-index-core's BaseEmbedding over Celery (the `llama-index` extra).

    from inference_tasks.integrations.llama_index import InferenceTasksEmbedding
    Settings.embed_model = InferenceTasksEmbedding(model="minilm")

LlamaIndex splits a node list into `embed_batch_size` pieces itself; each piece is then split again into
tasks of `batch_size`. The async forms run the blocking calls in the default executor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from inference_tasks.integrations.embedding_calls import DEFAULT_BATCH_SIZE, EmbeddingCalls


class InferenceTasksEmbedding(BaseEmbedding):
    """Embeddings computed by the fleet; the arguments are InferenceTasksEmbeddings' (langchain.py)."""

    _calls: EmbeddingCalls = PrivateAttr()

    def __init__(
        self, model: str | None = None, *, app: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float = 60.0, max_queue_depth: int | None = None, dimensions: int | None = None,
        query_prompt_name: str | None = None, document_prompt_name: str | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        kwargs.setdefault("embed_batch_size", batch_size)
        super().__init__(model_name=model or "default", **kwargs)
        if app is None:
            from inference_tasks import app
        self._calls = EmbeddingCalls(app, model, batch_size, timeout, max_queue_depth, dimensions,
                                     query_prompt_name, document_prompt_name)  # fmt: skip

    @classmethod
    def class_name(cls) -> str:
        return "InferenceTasksEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._calls.query(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._calls.documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._calls.documents(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(None, self._calls.query, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(None, self._calls.documents, texts)

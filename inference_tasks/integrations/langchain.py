"""LangChain: `InferenceTasksEmbeddings`, langchain-core's Embeddings over Celery (the `langchain` extra).

    from inference_tasks.integrations.langchain import InferenceTasksEmbeddings
    embeddings = InferenceTasksEmbeddings(model="minilm")
    store = InMemoryVectorStore.from_texts(texts, embeddings)

The async forms run the blocking calls in the event loop's default executor (one thread per call while
it waits), as langchain-core's own default does; each call's tasks are still sent all at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.embeddings import Embeddings

from inference_tasks.integrations.embedding_calls import DEFAULT_BATCH_SIZE, EmbeddingCalls


class InferenceTasksEmbeddings(Embeddings):
    """Embeddings computed by the fleet: `model` a catalogue alias (None: the default model's queue), `app`
    the Celery app (default: inference_tasks.app, configured by REDIS_URL and INFERENCE_*), `batch_size`
    texts per task, `timeout` seconds per task, `max_queue_depth` to wait for room before each send,
    `dimensions` to shorten vectors (Matryoshka), prompt names to override the catalogue's."""

    def __init__(
        self, model: str | None = None, *, app: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float = 60.0, max_queue_depth: int | None = None, dimensions: int | None = None,
        query_prompt_name: str | None = None, document_prompt_name: str | None = None,
    ) -> None:  # fmt: skip
        if app is None:
            from inference_tasks import app
        self.calls = EmbeddingCalls(app, model, batch_size, timeout, max_queue_depth, dimensions,
                                    query_prompt_name, document_prompt_name)  # fmt: skip

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.calls.documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.calls.query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(None, self.calls.documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(None, self.calls.query, text)

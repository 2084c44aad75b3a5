"""LangChain's and LlamaIndex's embedding interfaces over Celery, against the real packages and a real
worker: the vectors inference.embed gives, long lists split into tasks, the async forms too."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from inference_tasks import client
from inference_tasks.integrations.langchain import InferenceTasksEmbeddings
from inference_tasks.integrations.llama_index import InferenceTasksEmbedding

pytestmark = pytest.mark.worker
DOCUMENTS = ["My card was charged twice", "How do I reset my password?", "Where is my parcel?"]
QUERY = "billed two times for one order"


def direct(app, texts):
    return client.embed(app, texts, model="minilm")["embeddings"]


def test_langchain_embeds_a_query_and_documents_over_celery(inference_worker):
    """InferenceTasksEmbeddings(model="minilm"): the task's vectors for documents and the query, sync and async;
    the query finds its document first."""
    embeddings = InferenceTasksEmbeddings(model="minilm", app=inference_worker.app)
    documents = np.array(embeddings.embed_documents(DOCUMENTS))
    query = np.array(embeddings.embed_query(QUERY))
    assert np.allclose(documents, direct(inference_worker.app, DOCUMENTS), atol=1e-6)
    assert np.allclose(query, direct(inference_worker.app, [QUERY])[0], atol=1e-6)
    assert int(np.argmax(documents @ query)) == 0
    assert np.allclose(asyncio.run(embeddings.aembed_documents(DOCUMENTS)), documents, atol=1e-6)
    assert np.allclose(asyncio.run(embeddings.aembed_query(QUERY)), query, atol=1e-6)
    assert embeddings.embed_documents([]) == []


def test_a_list_longer_than_a_task_may_carry_is_split_into_tasks(inference_worker):
    """300 texts, more than one task may carry (INFERENCE_MAX_BATCH_TEXTS, 256): tasks of batch_size, in order."""
    texts = [f"ticket number {index} about a refund" for index in range(300)]
    vectors = InferenceTasksEmbeddings(model="minilm", app=inference_worker.app, batch_size=64).embed_documents(texts)
    assert len(vectors) == 300
    assert np.allclose(vectors[250:253], direct(inference_worker.app, texts[250:253]), atol=1e-6)
    with pytest.raises(ValueError, match="batch_size must be a whole number of 1 or more"):
        InferenceTasksEmbeddings(app=inference_worker.app, batch_size=0)


def test_llama_index_embeds_a_query_and_nodes_over_celery(inference_worker):
    embedding = InferenceTasksEmbedding(model="minilm", app=inference_worker.app, batch_size=2)
    batch = np.array(embedding.get_text_embedding_batch(DOCUMENTS))
    assert np.allclose(batch, direct(inference_worker.app, DOCUMENTS), atol=1e-6)
    query = np.array(embedding.get_query_embedding(QUERY))
    assert np.allclose(query, direct(inference_worker.app, [QUERY])[0], atol=1e-6)
    assert np.allclose(asyncio.run(embedding.aget_query_embedding(QUERY)), query, atol=1e-6)
    assert np.allclose(asyncio.run(embedding.aget_text_embedding(DOCUMENTS[0])), batch[0], atol=1e-6)
    assert embedding.model_name == "minilm" and embedding.class_name() == "InferenceTasksEmbedding"

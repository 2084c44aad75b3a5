"""Adapters that let RAG frameworks embed through the fleet, straight over Celery (no HTTP, no gateway):
langchain.py (langchain-core's Embeddings) and llama_index.py (llama-index-core's BaseEmbedding), both on
embedding_calls.py. Producer-side: no torch, no worker code; each framework is an optional extra."""

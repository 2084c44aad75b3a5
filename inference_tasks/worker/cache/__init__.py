"""The fleet's embedding cache: a text's vector computed once, read by every worker after it.

Worker side only (producers never import it). identity.py says what besides the text decides a
vector (the key's space), entries.py how a row is stored and checked, store.py talks to the cache's
own Redis (INFERENCE_CACHE_URL) and survives it being down, slow or full, and lookup.py puts them
together around a forward pass. docs/cache.md is the operator's view.
"""

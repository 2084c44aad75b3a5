"""`inference-tasks gateway`: the OpenAI-compatible HTTP front of the queues (docs/gateway.md).

An ASGI app (Starlette on uvicorn) that holds no model and imports no torch: each request becomes one
Celery task pushed onto its model's queue (wire.py, as the Ruby client pushes), and its result is awaited
on the result backend's pub/sub channel (results.py), so a request holds no thread and workers keep
their one-thread children, backpressure and fleet. Routes: app.py; request and response shapes:
embeddings_api.py, rerank_api.py, models_api.py; keys: auth.py; readiness: health.py.
"""

"""The service this project replaces, for the benchmark only: FastAPI + Uvicorn, a sync /embed endpoint.

Written the way the incident's service was: a plain `def` endpoint (FastAPI runs it in its
thread pool, so concurrent requests run concurrent forward passes), the model loaded at start,
the vectors returned as JSON lists. BENCH_THREADS unset keeps the libraries' default threading
(one thread per core in every pool, per request); BENCH_THREADS=N sets every pool to N before
torch loads (N=1 is "pinned"; 8/16/24 reproduce the default of bigger hosts on this one).

    BENCH_THREADS=1 python -m uvicorn benchmarks.http_service:app --port 8000
"""

from __future__ import annotations

import os

from inference_tasks.worker.host import threads

_threads = os.environ.get("BENCH_THREADS")
if _threads:
    threads.set_thread_env(os.environ, int(_threads))
threads.set_offline_env(os.environ)

import torch  # noqa: E402 - after the thread variables, which torch reads once at import
from fastapi import FastAPI  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from inference_tasks.config.catalogue import ModelEntry  # noqa: E402
from inference_tasks.config.defaults import DEFAULT_MODEL  # noqa: E402
from inference_tasks.worker.kinds.model_holder import ModelHolder  # noqa: E402

if _threads:
    threads.limit_loaded_pools(int(_threads))

holder = ModelHolder()
holder.load(ModelEntry("http-service", source=os.environ.get("BENCH_MODEL", DEFAULT_MODEL)), "cpu")
holder.warm_up()
model = holder.get()
app = FastAPI()


class EmbedRequest(BaseModel):
    texts: list[str]


@app.post("/embed")
def embed(request: EmbedRequest) -> dict:
    vectors = model.encode(request.texts, normalize=True)
    return {"model": model.name, "dim": model.dim, "embeddings": vectors.tolist()}


@app.get("/health")
def health() -> dict:
    return {"ok": True, "torch_threads": torch.get_num_threads()}

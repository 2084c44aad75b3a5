"""Which catalogue model a request names, and `GET /v1/models`.

A request names a model by its catalogue alias ("minilm"), by its source ("all-MiniLM-L6-v2", a hub id,
a directory) or by a source's last part ("sentence-transformers/all-MiniLM-L6-v2"), so code written for
OpenAI, TEI or Infinity keeps its model string; none: the catalogue's default."""

from __future__ import annotations

from typing import Any

from inference_tasks.config.catalogue import Catalogue, ModelEntry
from inference_tasks.gateway.errors import ApiError, bad_request


def resolve(catalogue: Catalogue, name: Any, task: str) -> ModelEntry:
    """The catalogue entry `name` names (ApiError 404 naming the known ones), if it serves `task`."""
    if name is None:
        return catalogue.entry(catalogue.default)
    if not isinstance(name, str) or not name:
        raise bad_request(f"model must be a model's name (a string), got {type(name).__name__}", "model")
    entry = catalogue.models.get(name) or _by_source(catalogue, name)
    if entry is None:
        known = ", ".join(f"{alias} ({model.source})" for alias, model in sorted(catalogue.models.items()))
        raise ApiError(404, f"The model {name[:100]!r} does not exist; known models: {known}", param="model",
                       code="model_not_found")  # fmt: skip
    if not entry.serves(task):
        raise bad_request(f"model {entry.alias!r} is a {entry.kind} model: it does not serve {task}", "model")
    return entry


def _by_source(catalogue: Catalogue, name: str) -> ModelEntry | None:
    for entry in catalogue.models.values():
        if name == entry.source or name.rsplit("/", 1)[-1] == entry.source.rsplit("/", 1)[-1]:
            return entry
    return None


def models_list(catalogue: Catalogue, workers: dict[str, list[str]]) -> dict[str, Any]:
    """OpenAI's model list, one object per catalogue model, with its kind and source beside OpenAI's fields, and
    how many workers consume its queue (`ready`: at least one; a request for a model with none is refused)."""
    data = [
        {"id": alias, "object": "model", "created": 0, "owned_by": "inference-tasks", "kind": entry.kind,
         "source": entry.source, "default": alias == catalogue.default, "workers": len(workers.get(alias, [])),
         "ready": bool(workers.get(alias))}
        for alias, entry in sorted(catalogue.models.items())
    ]  # fmt: skip
    return {"object": "list", "data": data}

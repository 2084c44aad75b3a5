"""What both framework adapters do: embed a list of texts as inference.embed tasks on one model's queue.

A long list is split into tasks of `batch_size` texts, all sent before the first is awaited, so a fleet of
many children embeds them side by side; vectors travel as f32-base64 (a quarter of JSON's bytes). Queries
and documents take the model's prompt names where its catalogue entry has them (e5's "query" and
"passage"), so a framework's embed_query and embed_documents get what the model was trained with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference_tasks import producer
from inference_tasks.codec import decode_embeddings
from inference_tasks.config.catalogue import UnknownModel, load_catalogue, model_queue
from inference_tasks.config.checks import ConfigError
from inference_tasks.routing import EMBED_TASK, F32_BASE64_ENCODING, INFERENCE_QUEUE

# The prompt names a catalogue entry may give its query and document prefixes, in order of preference.
QUERY_PROMPT_NAMES = ("query",)
DOCUMENT_PROMPT_NAMES = ("document", "passage", "doc")
DEFAULT_BATCH_SIZE = 64


@dataclass
class EmbeddingCalls:
    """Blocking embed calls on model `model` (an alias; None: the fleet's default queue) through Celery `app`."""

    app: Any
    model: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    timeout: float = 60.0
    max_queue_depth: int | None = None
    dimensions: int | None = None
    query_prompt_name: str | None = None
    document_prompt_name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a whole number of 1 or more, got {self.batch_size!r}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be seconds above 0, got {self.timeout!r}")
        prompts = model_prompts(self.app, self.model)
        if self.query_prompt_name is None:
            self.query_prompt_name = first_of(QUERY_PROMPT_NAMES, prompts)
        if self.document_prompt_name is None:
            self.document_prompt_name = first_of(DOCUMENT_PROMPT_NAMES, prompts)

    def documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed(list(texts), self.document_prompt_name)

    def query(self, text: str) -> list[float]:
        return self.embed([text], self.query_prompt_name)[0]

    def embed(self, texts: list[str], prompt_name: str | None) -> list[list[float]]:
        """One vector per text, in order; the tasks' errors (InvalidInput, QueueFull, timeouts) as raised."""
        if not texts:
            return []
        kwargs: dict[str, Any] = {"normalize": True, "encoding": F32_BASE64_ENCODING}
        if prompt_name is not None:
            kwargs["prompt_name"] = prompt_name
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        sent = [self._send(texts[start : start + self.batch_size], kwargs)
                for start in range(0, len(texts), self.batch_size)]  # fmt: skip
        vectors: list[list[float]] = []
        for result in sent:
            vectors.extend(decode_embeddings(producer.collect(result, self.timeout)).tolist())
        return vectors

    def _send(self, texts: list[str], kwargs: dict[str, Any]) -> Any:
        if self.max_queue_depth is not None:
            queue = model_queue(self.model) if self.model else INFERENCE_QUEUE
            producer.wait_for_room(self.app, queue, self.max_queue_depth, self.timeout)
        return producer.send(self.app, EMBED_TASK, args=[texts], kwargs=kwargs, model=self.model)


def model_prompts(app: Any, model: str | None) -> dict[str, str]:
    """The prompts of `model`'s catalogue entry (INFERENCE_MODELS_FILE on this producer), or none when this
    producer has no catalogue that names it (the caller can still name prompts itself)."""
    try:
        catalogue = load_catalogue(app.settings.models_file)
        return dict(catalogue.entry(model or catalogue.default).prompts)
    except (UnknownModel, ConfigError, OSError):
        return {}


def first_of(names: tuple[str, ...], prompts: dict[str, str]) -> str | None:
    return next((name for name in names if name in prompts), None)

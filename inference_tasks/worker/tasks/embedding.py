"""inference.embed and inference.classify: validate the request, ask the holder for the model, return plain JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import Task, shared_task

from inference_tasks.clients.connections import broker_redis
from inference_tasks.ml import store
from inference_tasks.request_options import encode_options, query_prompt
from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_TASK,
    JSON_ENCODING,
)
from inference_tasks.validation import (
    InvalidInput,
    check_count,
    check_flag,
    check_labels,
    check_model,
    check_name,
    check_texts,
    reject_unknown,
)
from inference_tasks.worker.batching.strategy import CoalescedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.tasks.steps import (
    EXPECTED_ERRORS,
    embedding_model,
    note_tokens,
    read_tokens,
    vectors_as_asked,
)
from inference_tasks.worker.tasks.usage import TaskClock, count_tokens

if TYPE_CHECKING:
    from inference_tasks.config import Settings


EMBED_ARGUMENTS = ("texts", "normalize", "encoding", "model", "prompt_name", "prompt", "dimensions", "truncate")


@shared_task(name=EMBED_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def embed(
    self: Task, texts: Any = None, normalize: Any = True, encoding: Any = JSON_ENCODING, *, model: Any = None,
    prompt_name: Any = None, prompt: Any = None, dimensions: Any = None, truncate: Any = True, **unknown: Any,
) -> dict[str, Any]:  # fmt: skip
    """Embed a batch: {"model", "alias", "dim", "embeddings": [[float] per text, in input order], "usage"}.

    With a packed encoding ("f32-base64", "int8", "uint8", "binary", "ubinary") "embeddings" is one
    base64 string of every vector's bytes, with "count" and "encoding" (docs/tasks.md). `model`: the
    alias asked for (None: the one of the queue the task came from); "model" in the result is the
    served model's name, "alias" its catalogue alias. `prompt_name`/`prompt`: a named prompt of the
    model or a literal prefix (default: the model's default_prompt); `dimensions`: the first N
    components (renormalized when `normalize`); `truncate`: false fails a text over the model's limit.
    """
    clock = TaskClock.start(self.request)
    reject_unknown(EMBED_TASK, unknown, EMBED_ARGUMENTS)
    settings = self.app.settings
    alias = check_model(EMBED_TASK, model, settings)
    texts = check_texts(EMBED_TASK, texts, settings)
    holder = current().model
    embedder = embedding_model(EMBED_TASK, holder, alias)
    options = encode_options(
        EMBED_TASK, settings.served_model, normalize=normalize, encoding=encoding, prompt_name=prompt_name,
        prompt=prompt, truncate=truncate, dimensions=dimensions, dim=embedder.dim,
    )  # fmt: skip
    read = options.prompted(texts)
    count = read_tokens(EMBED_TASK, embedder, read, options.truncate)
    vectors = holder.encode_for(self.request.id, read, options.normalize)
    result = {"model": embedder.name, "alias": alias, **vectors_as_asked(holder, settings, vectors, options)}
    result["usage"] = clock.usage(count, holder.shared)
    note_tokens(count)
    return result


@shared_task(name=CLASSIFY_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def classify(
    self: Task, texts: Any = None, labels: Any = None, classifier: Any = None, classifier_version: Any = None,
    *, model: Any = None, truncate: Any = True, **unknown: Any,
) -> list[dict[str, Any]]:  # fmt: skip
    """Label each text, zero-shot over `labels` or with the trained head `classifier`.

    Zero-shot: the label whose embedding is most cosine-similar to the text's; scores are cosines.
    Trained head (inference.train_classifier): the most probable label; scores are probabilities.
    Either way one {"label", "score", "scores": {label: score}, "model", "alias", "usage"} per text,
    in input order ("model" and "alias": the model that served it, as inference.embed says them;
    "usage": the text's own tokens, the task's timings). Texts and zero-shot labels get the model's
    query prompt where its catalogue entry has one.
    """
    clock = TaskClock.start(self.request)
    reject_unknown(CLASSIFY_TASK, unknown, ("texts", "labels", "classifier", "classifier_version", "model", "truncate"))
    settings = self.app.settings
    alias = check_model(CLASSIFY_TASK, model, settings)
    holder = current().model
    texts = check_texts(CLASSIFY_TASK, texts, settings)
    truncate = check_flag(CLASSIFY_TASK, "truncate", truncate)
    if (labels is None) == (classifier is None):
        raise InvalidInput(f"{CLASSIFY_TASK}: give either labels (zero-shot) or classifier (a trained head), not both")
    embedder = embedding_model(CLASSIFY_TASK, holder, alias)
    prefix = query_prompt(settings.served_model)
    read = [prefix + text for text in texts] if prefix else texts
    counts = embedder.token_counts(read)
    count = count_tokens(CLASSIFY_TASK, counts, embedder.max_tokens, truncate)
    if classifier is None:
        if classifier_version is not None:
            raise InvalidInput(f"{CLASSIFY_TASK}: classifier_version needs classifier")
        labels = check_labels(CLASSIFY_TASK, labels, settings)
        similarities = (
            holder.encode_for(self.request.id, read, True)
            @ holder.label_embeddings([prefix + label for label in labels] if prefix else labels).T
        )
        rows = [predictions(labels, row.tolist()) for row in similarities]
    else:
        head = current_head(settings, holder.heads, check_name(CLASSIFY_TASK, classifier), classifier_version)
        if head.model != embedder.name:
            raise InvalidInput(
                f"{CLASSIFY_TASK}: classifier {head.name!r} v{head.version} was trained on embeddings of model "
                f"{head.model!r}, but this worker serves {embedder.name!r} (alias {alias!r}); send the task to the "
                "queue of the model it was trained on, or train it again on this model"
            )
        if problem := head.runtime_problem(embedder.backend):
            raise InvalidInput(f"{CLASSIFY_TASK}: {problem}")
        rows = [predictions(head.labels, row.tolist()) for row in head.probabilities(
            holder.encode_for(self.request.id, read, True)
        )]  # fmt: skip
    usage = clock.usage(count, holder.shared)
    note_tokens(count)
    served = {"model": embedder.name, "alias": alias}
    return [row | served | {"usage": row_usage(usage, index, counts, embedder.max_tokens)} for index, row in
            enumerate(rows)]  # fmt: skip


def row_usage(usage: dict[str, Any], index: int, counts: list[int], limit: int | None) -> dict[str, Any]:
    """One classify row's usage: its own text's tokens and whether it was cut; the task's timings."""
    cut = limit is not None and counts[index] > limit
    return {**usage, "tokens": min(counts[index], limit) if cut and limit else counts[index], "truncated": cut}


def current_head(
    settings: Settings, heads: dict[str, store.ClassifierHead], name: str, version: Any
) -> store.ClassifierHead:
    """The head to use, from this child's cache (`heads`) unless Redis holds a different (newer) version."""
    if version is not None:
        version = check_count(CLASSIFY_TASK, "classifier_version", version, 1, 2**31)
    client = broker_redis(settings)
    try:
        wanted = version or store.latest_version(client, name)
        cached = heads.get(name)
        if cached is not None and cached.version == wanted:
            return cached
        head = store.load_head(client, name, wanted)
    except store.UnknownClassifier as exc:
        raise InvalidInput(f"{CLASSIFY_TASK}: {exc}") from None
    if version is None:
        heads[name] = head
    return head


def predictions(labels: list[str], scores: list[float]) -> dict[str, Any]:
    """One text's result: the best label, its score, and every label's score."""
    best = max(range(len(labels)), key=scores.__getitem__)
    return {
        "label": labels[best],
        "score": scores[best],
        "scores": dict(zip(labels, scores, strict=True)),
    }

"""inference.embed and inference.classify: validate the request, ask the holder for the model, return plain JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import Task, shared_task

from inference_tasks.contract.options import encode_options, query_prompt
from inference_tasks.contract.specs import CLASSIFY, EMBED
from inference_tasks.ml import store
from inference_tasks.redis_access.connections import broker_redis
from inference_tasks.routing import (
    CLASSIFY_TASK,
    EMBED_TASK,
)
from inference_tasks.validation import InvalidInput
from inference_tasks.worker.batching.strategy import CoalescedTask
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.runtimes.model_files import model_name
from inference_tasks.worker.tasks.steps import (
    EXPECTED_ERRORS,
    note_tokens,
    read_tokens,
    vectors_as_asked,
)
from inference_tasks.worker.tasks.usage import TaskClock, count_tokens

if TYPE_CHECKING:
    from inference_tasks.config import Settings


@shared_task(name=EMBED_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def embed(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Embed a batch: {"model", "alias", "revision", "dim", "embeddings": [[float] per text, in input order],
    "usage"}.

    Arguments: contract/specs.py's EMBED. With a packed encoding ("f32-base64", "int8", "uint8",
    "binary", "ubinary") "embeddings" is one base64 string of every vector's bytes, with "count" and
    "encoding" (docs/tasks.md). "model" in the result is the served model's name, "alias" its
    catalogue alias, "revision" the first digits of its files' digest (lifecycle/model_identity.py).
    """
    clock = TaskClock.start(self.request)
    settings = self.app.settings
    request = EMBED.parse(args, kwargs, settings)
    holder = current().model
    encoder = holder.dense(EMBED_TASK, request["model"])
    options = encode_options(EMBED_TASK, settings.served_model, request, encoder.dim)
    read = options.prompted(request["texts"])
    count = read_tokens(EMBED_TASK, encoder, read, options.truncate)
    vectors = holder.encode_for(self.request.id, read, options.normalize, request["cache"])
    result = {"model": encoder.name, "alias": request["model"], "revision": holder.revision,
              **vectors_as_asked(holder, settings, vectors, options)}  # fmt: skip
    result["usage"] = clock.usage(count, holder.shared, holder.cached)
    note_tokens(count)
    return result


@shared_task(name=CLASSIFY_TASK, bind=True, base=CoalescedTask, throws=EXPECTED_ERRORS)
def classify(self: Task, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Label each text, zero-shot over `labels` or with the trained head `classifier` (contract/specs.py's
    CLASSIFY).

    Zero-shot: the label whose embedding is most cosine-similar to the text's; scores are cosines.
    Trained head (inference.train_classifier): the most probable label; scores are probabilities.
    Either way one {"label", "score", "scores": {label: score}, "model", "alias", "usage"} per text,
    in input order ("model" and "alias": the model that served it, as inference.embed says them;
    "usage": the text's own tokens, the task's timings). Texts and zero-shot labels get the model's
    query prompt where its catalogue entry has one.
    """
    clock = TaskClock.start(self.request)
    settings = self.app.settings
    request = CLASSIFY.parse(args, kwargs, settings)
    texts, labels, classifier, alias = request["texts"], request["labels"], request["classifier"], request["model"]
    if (labels is None) == (classifier is None):
        raise InvalidInput(f"{CLASSIFY_TASK}: give either labels (zero-shot) or classifier (a trained head), not both")
    if classifier is None and request["classifier_version"] is not None:
        raise InvalidInput(f"{CLASSIFY_TASK}: classifier_version needs classifier")
    holder = current().model
    encoder = holder.dense(CLASSIFY_TASK, alias)
    prefix = query_prompt(settings.served_model)
    read = [prefix + text for text in texts] if prefix else texts
    counts = encoder.token_counts(read)
    count = count_tokens(CLASSIFY_TASK, counts, encoder.max_tokens, request["truncate"])
    if classifier is None:
        similarities = (
            holder.encode_for(self.request.id, read, True, request["cache"])
            @ holder.label_embeddings([prefix + label for label in labels] if prefix else labels).T
        )
        rows = [predictions(labels, row.tolist()) for row in similarities]
    else:
        head = current_head(settings, holder.heads, classifier, request["classifier_version"])
        # A head trained before results named a local model by its directory's name carries the path.
        if encoder.name not in (head.model, model_name(head.model)):
            raise InvalidInput(
                f"{CLASSIFY_TASK}: classifier {head.name!r} v{head.version} was trained on embeddings of model "
                f"{head.model!r}, but this worker serves {encoder.name!r} (alias {alias!r}); send the task to the "
                "queue of the model it was trained on, or train it again on this model"
            )
        if problem := head.runtime_problem(encoder.backend):
            raise InvalidInput(f"{CLASSIFY_TASK}: {problem}")
        rows = [predictions(head.labels, row.tolist()) for row in head.probabilities(
            holder.encode_for(self.request.id, read, True, request["cache"])
        )]  # fmt: skip
    usage = clock.usage(count, holder.shared, holder.cached)
    note_tokens(count)
    served = {"model": encoder.name, "alias": alias}
    return [row | served | {"usage": row_usage(usage, index, counts, encoder.max_tokens)} for index, row in
            enumerate(rows)]  # fmt: skip


def row_usage(usage: dict[str, Any], index: int, counts: list[int], limit: int | None) -> dict[str, Any]:
    """One classify row's usage: its own text's tokens and whether it was cut; the task's timings."""
    cut = limit is not None and counts[index] > limit
    return {**usage, "tokens": min(counts[index], limit) if cut and limit else counts[index], "truncated": cut}


def current_head(
    settings: Settings, heads: dict[str, store.ClassifierHead], name: str, version: int | None
) -> store.ClassifierHead:
    """The head to use, from this child's cache (`heads`) unless Redis holds a different (newer) version."""
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

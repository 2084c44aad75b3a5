"""Run by the official OpenAI client's own venv (.venv-openai, scripts/setup_openai_client.sh), never by the
project's: imports nothing of this project. Reads {"base_url", "api_key", "texts", "model"} as JSON on
stdin, calls the gateway as an OpenAI user would, and prints what came back as JSON; with {"limited_key"}
instead, calls with that key until the gateway refuses one."""

from __future__ import annotations

import importlib.util
import json
import sys

import openai


def error_of(call) -> dict:
    try:
        call()
    except openai.APIStatusError as error:
        return {"class": type(error).__name__, "status": error.status_code, "body": error.body}
    return {"class": None}


def rate_limited(spec: dict) -> dict:
    """With {"limited_key"}: the key's calls until the first error (at most 10), and that error."""
    limited = openai.OpenAI(base_url=spec["base_url"], api_key=spec["limited_key"], max_retries=0, timeout=60)
    for calls in range(1, 11):
        error = error_of(lambda: limited.embeddings.create(model=spec["model"], input="refund please"))
        if error["class"] is not None:
            return {"calls": calls, **error}
    return {"calls": 10, "class": None}


def main() -> None:
    spec = json.load(sys.stdin)
    if "limited_key" in spec:
        json.dump(rate_limited(spec), sys.stdout)
        return
    client = openai.OpenAI(base_url=spec["base_url"], api_key=spec["api_key"], max_retries=0, timeout=60)
    texts, model = spec["texts"], spec["model"]
    plain = client.embeddings.create(model=model, input=texts)  # the client asks for base64 and decodes it
    floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
    raw = client.embeddings.create(model=model, input=texts, encoding_format="base64")
    short = client.embeddings.create(model=model, input=texts[0], dimensions=128)
    wrong = openai.OpenAI(base_url=spec["base_url"], api_key="not-a-key", max_retries=0)
    report = {
        "project_importable": importlib.util.find_spec("inference_tasks") is not None,
        "default": [item.embedding for item in plain.data],
        "float": [item.embedding for item in floats.data],
        "base64": [item.embedding for item in raw.data],
        "indexes": [item.index for item in floats.data],
        "usage": floats.usage.model_dump(),
        "model": floats.model,
        "short": short.data[0].embedding,
        "models": [item.id for item in client.models.list().data],
        "wrong_key": error_of(lambda: wrong.embeddings.create(model=model, input="x")),
        "unknown_model": error_of(lambda: client.embeddings.create(model="no-such-model", input="x")),
        "empty_input": error_of(lambda: client.embeddings.create(model=model, input=[])),
        "blank_input": error_of(lambda: client.embeddings.create(model=model, input="")),
    }
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()

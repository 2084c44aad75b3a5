"""Models named by their Hugging Face hub id (`BAAI/bge-small-en-v1.5`), pinned to a revision or not.

A catalogue `source` that is not a packaged model and not a local directory may be a hub id, with an
optional `revision` (a commit, tag or branch). Nothing downloads at run time: `inference-tasks
pull-model` fetches it into the Hugging Face cache at deploy time (the one command that uses the
network), and workers resolve it there with the network off (worker/runtimes/model_files.py). Inside the
package such a model is one string, `<id>` or `<id>@<revision>`, so every place that passes a
model's source passes the pin with it. Producer-safe: stdlib only.
"""

from __future__ import annotations

import re

# A hub repository id: an owner and a name (letters, digits, '.', '_' and '-'), as the hub spells them.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# A branch, tag or commit (no '/' or '@': they would not round-trip through `<id>@<revision>`).
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PULL_COMMAND = "inference-tasks pull-model"


def is_hub_id(text: str) -> bool:
    return bool(HUB_ID.match(text))


def hub_reference(repo_id: str, revision: str | None) -> str:
    """The one string a hub model travels as: `<id>` or `<id>@<revision>`."""
    return f"{repo_id}@{revision}" if revision else repo_id


def parse_reference(source: str) -> tuple[str, str | None] | None:
    """(id, revision) of a hub reference, or None for any other source (a path, a packaged model)."""
    repo_id, _, revision = source.partition("@")
    if not is_hub_id(repo_id) or (revision and not REVISION.match(revision)):
        return None
    return repo_id, revision or None


def not_pulled_message(source: str, alias: str | None = None) -> str:
    """What a worker says when a hub model is not in the cache: the command that fetches it."""
    repo_id, revision = parse_reference(source) or (source, None)
    pinned = f" at revision {revision}" if revision else ""
    return (
        f"model {repo_id!r}{pinned} is not in the Hugging Face cache (HF_HOME / HF_HUB_CACHE): run "
        f"`{PULL_COMMAND} {alias or repo_id}` once at deploy time, with the same cache; workers never download"
    )

"""docs/tasks.md's argument tables, rendered from the specs (`python -m inference_tasks.contract.markdown`
prints them; tests/unit/test_task_specs.py holds the page to them)."""

from __future__ import annotations

import json

from inference_tasks.contract.spec import TaskSpec
from inference_tasks.contract.specs import SPECS

BEGIN = "<!-- argument tables: rendered by `python -m inference_tasks.contract.markdown`; do not edit -->"
END = "<!-- end of argument tables -->"


def default_of(spec_default: object, required: bool) -> str:
    return "required" if required else f"`{json.dumps(spec_default)}`"


def table(spec: TaskSpec) -> str:
    """One task's arguments as a Markdown section: name, type, default, how it may be given, rule, meaning."""
    lines = [f"### `{spec.task}`", ""]
    if not spec.arguments:
        return "\n".join([*lines, "No arguments."])
    lines += ["| argument | type | default | given | allowed | what |", "|---|---|---|---|---|---|"]
    for argument in spec.arguments:
        given = "position or keyword" if argument.positional else "keyword only"
        allowed = argument.rule.allowed + ("" if argument.rule.check else " (checked where the task runs)")
        cells = (f"`{argument.name}`", f"`{argument.kind}`", default_of(argument.default, argument.required), given,
                 allowed, argument.doc)  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables() -> str:
    """Every task's section between the markers, as docs/tasks.md holds them."""
    return "\n\n".join([BEGIN, *(table(spec) for spec in SPECS.values()), END])


if __name__ == "__main__":
    print(tables())

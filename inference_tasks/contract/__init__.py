"""The task contract: what each public task takes, as data (specs.py, one `TaskSpec` per task, built from
spec.py's parts and rules.py's checks), and the encode options those arguments make (options.py).

The worker parses a request against its task's spec once (names, positions, defaults, each argument's
own rule), the micro-batch planner reads the same parse, docs/tasks.md's argument tables are rendered
from it (markdown.py), and tests hold both clients to it. Producer-safe: nothing loaded.
"""

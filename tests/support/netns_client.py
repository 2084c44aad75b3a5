"""The client host of tests/external/test_hosts.py: runs inside its network namespace (the test process has no
address on the simulated network) and prints one JSON object.

    python -m tests.support.netns_client send COUNT TEXTS        # enqueue, print the task ids
    python -m tests.support.netns_client wait ID...              # final states (waits up to 180 s)
    python -m tests.support.netns_client hosts                   # doctor's and the exporter's per-host view
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import redis

from inference_tasks import create_app
from inference_tasks.config import load_settings
from inference_tasks.routing import EMBED_TASK
from tests.support.waiting import poll_until

WAIT_S = 180


def send(count: int, texts: int) -> dict:
    app = create_app(load_settings())
    ids = []
    for index in range(count):
        task_id = str(uuid.uuid4())
        app.send_task(
            EMBED_TASK, args=[[f"text {index}.{n} for a simulated host" for n in range(texts)]], task_id=task_id
        )
        ids.append(task_id)
    return {"ids": ids, "sent_at": time.time()}


def wait(ids: list[str]) -> dict:
    client = redis.Redis.from_url(load_settings().redis_url)
    final: dict[str, dict] = {}

    def all_final() -> bool:
        pending = [task_id for task_id in ids if task_id not in final]
        for task_id, raw in zip(pending, client.mget([f"celery-task-meta-{i}" for i in pending]), strict=True):
            meta = json.loads(raw) if raw else {}
            if meta.get("status") in ("SUCCESS", "FAILURE", "REVOKED"):
                final[task_id] = {"status": meta["status"], "date_done": meta.get("date_done")}
        return len(final) == len(ids)

    poll_until(all_final, WAIT_S, poll_s=0.1)
    return {"final": final, "missing": [task_id for task_id in ids if task_id not in final]}


def hosts() -> dict:
    from inference_tasks.ops.doctor import ask_workers, host_verdicts
    from inference_tasks.ops.metrics import InferenceCollector

    app = create_app(load_settings())
    replies = ask_workers(app, timeout=3)
    verdicts = {host.host: {"verdict": host.verdict, "compute_threads": host.compute_threads, "cores": host.cores}
                for host in host_verdicts(replies)}  # fmt: skip
    gauges: dict[str, dict[str, float]] = {}
    for family in InferenceCollector(app, broadcast_timeout=3).collect():
        if family.name.startswith("inference_host_"):
            for sample in family.samples:
                gauges.setdefault(sample.labels["host"], {})[sample.name] = sample.value
    return {"workers": sorted(replies), "doctor": verdicts, "exporter": gauges}


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "send":
        report = send(int(args[0]), int(args[1]))
    elif command == "wait":
        report = wait(args)
    elif command == "hosts":
        report = hosts()
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()

"""What tracing costs: the same worker with tracing off (no OTEL_* variables: the shipped default) and on
(exporting every task's spans over OTLP/HTTP to a receiver on loopback), side by side on one redis-server:
one-text tasks one at a time (push to stored result, p50/p99) and a burst of one-text tasks
(tasks/s, micro-batched), the two workers measured in alternated rounds (A B B A). Each worker has
one child; each task carries a traceparent, so the traced worker exports a span tree per task.

    .venv/bin/python -m benchmarks.tracing            # ~1 minute
    .venv/bin/python -m benchmarks.tracing --quick
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.alternation import alternated
from benchmarks.harness.pushes import all_at_once, one_at_a_time
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.stats import percentile
from benchmarks.harness.workload import REPO_ROOT
from inference_tasks.producer import send
from inference_tasks.routing import EMBED_TASK
from tests.support.localstack import start_redis, start_worker
from tests.support.otlp_receiver import start_receiver

# The steps of a one-text task's trace (worker/lifecycle/task_traces.py), in order.
STEPS = ("queue wait", "screening", "micro-batch wait", "forward pass", "result store")


def traced_sender(app: Any, what: str, trace_ids: list[str] | None = None) -> Callable[[int], Any]:
    """Sends one one-text task carrying a traceparent of a new trace (its trace id added to `trace_ids`)."""

    def send_one(index: int) -> Any:
        trace_id = secrets.token_hex(16)
        if trace_ids is not None:
            trace_ids.append(trace_id)
        headers = {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
        return send(app, EMBED_TASK, args=[[f"tracing {what} {index}"]], headers=headers)

    return send_one


def split(receiver: Any, trace_ids: list[str]) -> dict[str, float]:
    """p50 milliseconds of each step of the one-at-a-time tasks' traces, and of the rest of the task's span
    (the task body outside its forward pass, Celery's tracer, the ack)."""
    steps: dict[str, list[float]] = {name: [] for name in (*STEPS, "rest of the task", "task span")}
    for trace_id in trace_ids:
        spans = receiver.of_trace(trace_id)
        roots = [span for span in spans if span["name"] == EMBED_TASK]
        if len(roots) != 1:
            continue
        root = roots[0]
        children = {span["name"]: span for span in spans if span["parent_span_id"] == root["span_id"]}
        if not set(STEPS) <= set(children):
            continue  # a micro-batched task: its forward pass is shared
        lengths = {name: (children[name]["end"] - children[name]["start"]) / 1e6 for name in STEPS}
        total = (root["end"] - root["start"]) / 1e6
        for name, value in [
            *lengths.items(),
            ("rest of the task", total - sum(lengths.values())),
            ("task span", total),
        ]:
            steps[name].append(value)
    return {name: percentile(values, 0.5) for name, values in steps.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60, help="one-at-a-time tasks per round and worker")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "tracing.json")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.rounds = 10, 2
    work = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    server = start_redis(work / "redis")
    receiver = start_receiver()
    traced_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "bench"}
    workers = {
        "tracing off": start_worker("off", server.url(0), work, dict(os.environ), concurrency=1, task_events="false"),
        "tracing on": start_worker("on", server.url(1), work, dict(os.environ), concurrency=1, task_events="false",
                                   extra_env=traced_env),
    }  # fmt: skip
    took: dict[str, list[float]] = {name: [] for name in workers}
    rates: dict[str, list[float]] = {name: [] for name in workers}
    one_at_a_time_traces: list[str] = []
    try:
        for worker in workers.values():
            one_at_a_time(traced_sender(worker.app, "warm-up"), 5)  # the model warm, connections made
        for _, name in alternated(list(workers), args.rounds):
            ids = one_at_a_time_traces if name == "tracing on" else None
            took[name] += one_at_a_time(traced_sender(workers[name].app, "latency", ids), args.tasks)
            rates[name].append(all_at_once(traced_sender(workers[name].app, "burst"), args.tasks * 2))
    finally:
        for worker in workers.values():
            worker.stop()
        receiver.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    rows = {
        name: {
            "tasks": len(values),
            "p50_ms": 1000 * percentile(values, 0.5),
            "p99_ms": 1000 * percentile(values, 0.99),
            "burst_tasks_per_s": sum(rates[name]) / len(rates[name]),
        }
        for name, values in took.items()
    }
    print(f"CPU: {cpu_name()}; one worker each, one child, {args.rounds} alternated rounds; spans received: "
          f"{len(receiver.spans)}")  # fmt: skip
    for name, row in rows.items():
        print(f"{name:<12} push to result p50 {row['p50_ms']:6.1f} ms  p99 {row['p99_ms']:6.1f} ms  "
              f"burst {row['burst_tasks_per_s']:6.0f} tasks/s")  # fmt: skip
    steps = split(receiver, one_at_a_time_traces)
    print("one text at a time, where its time goes (p50 of each step, from its trace):")
    for name, value in steps.items():
        print(f"  {name:<18} {value:7.2f} ms")
    report = {"rounds": args.rounds, "results": rows, "spans_received": len(receiver.spans), "split_p50_ms": steps}
    write_report(args.out, "tracing", report)


if __name__ == "__main__":
    main()

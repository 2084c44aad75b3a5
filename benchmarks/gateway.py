"""The gateway against the same load sent straight to Celery, side by side in one run.

One worker as shipped (the default runtime, concurrency = cores) and one `inference-tasks gateway` on the
same Redis. The load: `--clients` concurrent clients (200), each sending one one-text embed request at a
time, back to back, until the round's requests are done. Rounds alternate the two ways in
(harness/alternation.py):

- direct: the clients push Celery messages to the model's queue and await the results on the result
  backend's pub/sub, with the gateway's own asyncio wire client (gateway/dispatch.py) in this process:
  the same messages and the same wait, without HTTP;
- gateway: the clients POST /v1/embeddings (OpenAI's default base64) over keep-alive HTTP/1.1
  connections, one per client, to the gateway, which sends the same task.

Per way: requests per second (median over rounds, and the median of each round's paired ratio), latency
p50 and p99 over every request, and the gateway's own CPU (seconds per 1,000 requests, share of a core).
At 200 clients the worker is saturated and a request's latency is mostly its wait in the queue, which
follows throughput; so the gateway's own latency is measured with one client too (`--serial` requests per
round, alternated), where the added p50 is what the gateway itself costs a request.

    .venv/bin/python -m benchmarks.gateway            # ~2 minutes on 2 cores
    .venv/bin/python -m benchmarks.gateway --quick    # a smoke run of both paths
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from benchmarks.harness.alternation import alternated
from benchmarks.harness.gateway_stack import gateway_stack
from benchmarks.harness.http_client import HttpClient
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, ticket_texts
from inference_tasks.config import Settings
from inference_tasks.gateway.dispatch import Dispatcher
from inference_tasks.gateway.redis_clients import broker_client, results_client
from inference_tasks.gateway.results import ResultWaiter
from inference_tasks.routing import EMBED_TASK, F32_BASE64_ENCODING

GOALS = {"throughput_share": 0.90, "added_p50_ms": 1.0}
MODEL = "minilm"
TIMEOUT_S = 120.0


async def run_round(way: str, requests: int, clients: int, port: int, dispatcher: Dispatcher,
                    texts: list[str]) -> dict[str, Any]:  # fmt: skip
    """`requests` one-text embeds by `clients` concurrent clients; throughput and every latency."""
    latencies: list[float] = []
    left = iter(range(requests))
    errors = 0

    async def one_client() -> None:
        nonlocal errors
        http = HttpClient(port)
        try:
            for index in left:
                text = texts[index % len(texts)]
                began = time.perf_counter()
                if way == "gateway":
                    body = orjson.dumps({"model": MODEL, "input": [text], "encoding_format": "base64"})
                    status, _ = await http.post("/v1/embeddings", body)
                    errors += status != 200
                else:
                    kwargs = {"normalize": True, "encoding": F32_BASE64_ENCODING}
                    await dispatcher.run(EMBED_TASK, [[text]], kwargs, MODEL, TIMEOUT_S)
                latencies.append((time.perf_counter() - began) * 1000)
        finally:
            await http.close()

    began = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    took = time.perf_counter() - began
    return {"requests_per_s": requests / took, "latencies_ms": latencies, "errors": errors, "seconds": took}


async def measure(settings: Settings, port: int, gateway_pid: int, rounds: int, requests: int,
                  clients: int, serial: int) -> dict[str, Any]:  # fmt: skip
    broker, results = broker_client(settings), results_client(settings)
    dispatcher = Dispatcher(broker, ResultWaiter(results), max_queue_depth=10**9)
    texts = ticket_texts()
    gateway = psutil.Process(gateway_pid)
    found: dict[str, list[dict[str, Any]]] = {"direct": [], "gateway": [], "direct 1": [], "gateway 1": []}
    try:
        for way in ("direct", "gateway"):  # warm both paths: connections, the worker's children, the gateway
            await run_round(way, min(requests, 400), clients, port, dispatcher, texts)
        for _, way in alternated(["direct", "gateway"], rounds * 2):
            cpu_before = sum(gateway.cpu_times()[:2])
            row = await run_round(way, requests, clients, port, dispatcher, texts)
            row["gateway_cpu_s"] = sum(gateway.cpu_times()[:2]) - cpu_before
            found[way].append(row)
        for _, way in alternated(["direct", "gateway"], rounds * 2):  # one client: the gateway's own latency
            cpu_before = sum(gateway.cpu_times()[:2])
            row = await run_round(way, serial, 1, port, dispatcher, texts)
            row["gateway_cpu_s"] = sum(gateway.cpu_times()[:2]) - cpu_before
            found[f"{way} 1"].append(row)
    finally:
        await dispatcher.waiter.close()
        await broker.aclose()
        await results.aclose()
    return found


def summary(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for way, rows in found.items():
        latencies = sorted(value for row in rows for value in row["latencies_ms"])
        cpu = sum(row["gateway_cpu_s"] for row in rows)
        seconds = sum(row["seconds"] for row in rows)
        count = len(latencies)
        out[way] = {
            "requests_per_s": statistics.median(row["requests_per_s"] for row in rows),
            "p50_ms": latencies[count // 2], "p99_ms": latencies[min(count - 1, int(count * 0.99))],
            "errors": sum(row["errors"] for row in rows),
            "gateway_cpu_s_per_1000": cpu / count * 1000, "gateway_core_share": cpu / seconds,
        }  # fmt: skip
    pairs = zip(found["gateway"], found["direct"], strict=True)
    out["paired_share"] = statistics.median(mine["requests_per_s"] / theirs["requests_per_s"] for mine, theirs in pairs)
    out["added_p50_ms"] = out["gateway 1"]["p50_ms"] - out["direct 1"]["p50_ms"]
    out["added_p50_ms_at_load"] = out["gateway"]["p50_ms"] - out["direct"]["p50_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way")
    parser.add_argument("--requests", type=int, default=3000, help="requests per round")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--serial", type=int, default=300, help="requests per round with one client")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "gateway.json")
    args = parser.parse_args()
    rounds, requests, serial = (1, 400, 40) if args.quick else (args.rounds, args.requests, args.serial)
    with gateway_stack("gateway", ["--no-auth"], INFERENCE_GATEWAY_MODELS=MODEL) as stack:
        settings = Settings(redis_url=stack.redis_url)
        found = asyncio.run(measure(settings, stack.port, stack.gateway_pid, rounds, requests, args.clients, serial))
    report(summary(found), args, rounds, requests)


def report(found: dict[str, Any], args: argparse.Namespace, rounds: int, requests: int) -> None:
    print(f"CPU: {cpu_name()}; one worker (the default runtime, concurrency = cores) and the gateway on one host;")
    print(f"{args.clients} concurrent clients, one text per request, {rounds} rounds of {requests} requests per way")
    print("way         req/s   p50 ms   p99 ms  errors  gateway CPU s/1000 req  gateway core share  (1: one client)")
    for way in ("direct", "gateway", "direct 1", "gateway 1"):
        row = found[way]
        print(f"{way:<9}{row['requests_per_s']:>7.0f} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['errors']:>7}"
              f" {row['gateway_cpu_s_per_1000']:>23.3f} {row['gateway_core_share']:>19.1%}")  # fmt: skip
    share, added = found["paired_share"], found["added_p50_ms"]
    print(
        f"  goal >= {GOALS['throughput_share']:.0%} of direct throughput: {share:.1%} "
        f"({'met' if share >= GOALS['throughput_share'] else 'not met'}; median of each round's paired ratio)"
    )
    print(
        f"  goal <= {GOALS['added_p50_ms']} ms added p50 (one client: the gateway's own latency): {added:+.2f} ms "
        f"({'met' if added <= GOALS['added_p50_ms'] else 'not met'}); at {args.clients} clients "
        f"{found['added_p50_ms_at_load']:+.1f} ms: the saturated worker's queue, which follows throughput"
    )
    write_report(args.out, "gateway", {"rounds": rounds, "requests": requests, "clients": args.clients, **found})


if __name__ == "__main__":
    main()

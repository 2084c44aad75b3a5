"""Tenant isolation at the gateway: one tenant's 200 clients against another's one, side by side in one run.

One worker as shipped (the default runtime, concurrency = cores) and one `inference-tasks gateway` with a
tenants file (docs/gateway.md, "Tenants"), on one redis-server:

- bulk: `--clients` concurrent clients (200), each sending one-text embeds back to back; the tenant may have
  `--max-in-flight` requests (32) being served; a refused request (429) waits its Retry-After and is sent
  again, so every text is embedded in the end;
- interactive: one client, one-text embeds back to back, `--serial` per round.

Rounds alternate "alone" (the interactive client only) and "contended" (both tenants at once, the bulk clients
stopped once the interactive round is done). Reported: the interactive p50 and p99 alone and contended (goal:
contended p50 within 2x of alone), the bulk tenant's throughput and refusals, and that nothing was lost (every
bulk text ended with its vector; no answer but 200 or 429).

    .venv/bin/python -m benchmarks.gateway_tenants            # ~2 minutes on 2 cores
    .venv/bin/python -m benchmarks.gateway_tenants --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.harness.alternation import alternated
from benchmarks.harness.gateway_stack import gateway_stack
from benchmarks.harness.http_client import HttpClient
from benchmarks.harness.report import cpu_name, write_report
from benchmarks.harness.workload import REPO_ROOT, ticket_texts

GOAL_P50_RATIO = 2.0
MODEL = "minilm"
TENANTS = """
[tenants.bulk]
keys = ["bulk-key"]
max_in_flight = {max_in_flight}

[tenants.interactive]
keys = ["interactive-key"]
"""


def body(text: str) -> bytes:
    return orjson.dumps({"model": MODEL, "input": [text], "encoding_format": "base64"})


async def interactive_round(port: int, requests: int, texts: list[str]) -> list[float]:
    """Latencies (ms) of `requests` one-text embeds, one at a time."""
    http = HttpClient(port, {"Authorization": "Bearer interactive-key"})
    latencies = []
    try:
        for index in range(requests):
            began = time.perf_counter()
            status, answer = await http.post("/v1/embeddings", body(texts[index % len(texts)]))
            assert status == 200, answer[:300]
            latencies.append((time.perf_counter() - began) * 1000)
    finally:
        await http.close()
    return latencies


async def bulk_clients(port: int, clients: int, texts: list[str], stop: asyncio.Event) -> dict[str, int]:
    """`clients` bulk clients until `stop`: each text sent until it is embedded (429: wait Retry-After)."""
    counts = {"sent": 0, "embedded": 0, "refused": 0, "other": 0}

    async def one(offset: int) -> None:
        http = HttpClient(port, {"Authorization": "Bearer bulk-key"})
        index = offset
        try:
            while not stop.is_set():
                counts["sent"] += 1
                text = texts[index % len(texts)]
                status, headers, answer = await http.post_with_headers("/v1/embeddings", body(text))
                if status == 200 and orjson.loads(answer)["data"][0]["embedding"]:
                    counts["embedded"] += 1
                    index += clients
                elif status == 429:
                    counts["refused"] += 1
                    await asyncio.sleep(float(headers.get("retry-after", "1")))
                else:
                    counts["other"] += 1
        finally:
            await http.close()

    await asyncio.gather(*(one(offset) for offset in range(clients)))
    return counts


async def contended_round(port: int, requests: int, clients: int, texts: list[str]) -> tuple[list[float], dict]:
    stop = asyncio.Event()
    bulk = asyncio.create_task(bulk_clients(port, clients, texts, stop))
    await asyncio.sleep(1.0)  # the bulk tenant at its limit before the interactive client starts
    began = time.perf_counter()
    latencies = await interactive_round(port, requests, texts)
    seconds = time.perf_counter() - began
    stop.set()
    counts = await bulk
    return latencies, {**counts, "seconds": seconds}


async def measure(port: int, rounds: int, serial: int, clients: int) -> dict[str, Any]:
    texts = ticket_texts()
    await interactive_round(port, 20, texts)  # warm
    found: dict[str, Any] = {"alone": [], "contended": [], "bulk": []}
    for _, way in alternated(["alone", "contended"], rounds * 2):
        if way == "alone":
            found["alone"].append(await interactive_round(port, serial, texts))
        else:
            latencies, counts = await contended_round(port, serial, clients, texts)
            found["contended"].append(latencies)
            found["bulk"].append(counts)
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def summary(found: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for way in ("alone", "contended"):
        every = [value for latencies in found[way] for value in latencies]
        out[way] = {"p50_ms": statistics.median(every), "p99_ms": percentile(every, 0.99), "requests": len(every)}
    bulk = found["bulk"]
    seconds = sum(row["seconds"] for row in bulk)
    out["bulk"] = {what: sum(row[what] for row in bulk) for what in ("sent", "embedded", "refused", "other")}
    out["bulk"]["embedded_per_s"] = out["bulk"]["embedded"] / seconds
    out["p50_ratio"] = out["contended"]["p50_ms"] / out["alone"]["p50_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way")
    parser.add_argument("--serial", type=int, default=200, help="interactive requests per round")
    parser.add_argument("--clients", type=int, default=200, help="the bulk tenant's concurrent clients")
    parser.add_argument("--max-in-flight", type=int, default=32, help="the bulk tenant's max_in_flight")
    parser.add_argument("--fair-share", type=int, default=4, help="INFERENCE_GATEWAY_FAIR_SHARE (0: off)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "gateway_tenants.json")
    args = parser.parse_args()
    rounds, serial = (1, 40) if args.quick else (args.rounds, args.serial)
    tenants = Path(tempfile.mkdtemp(prefix="bench-tenants-")) / "tenants.toml"
    tenants.write_text(TENANTS.format(max_in_flight=args.max_in_flight))
    settings = {"INFERENCE_GATEWAY_MODELS": MODEL, "INFERENCE_GATEWAY_TENANTS_FILE": str(tenants),
                "INFERENCE_GATEWAY_FAIR_SHARE": str(args.fair_share)}  # fmt: skip
    with gateway_stack("tenants", [], **settings) as stack:
        found = asyncio.run(measure(stack.port, rounds, serial, args.clients))
    report(summary(found), args, rounds, serial)


def report(found: dict[str, Any], args: argparse.Namespace, rounds: int, serial: int) -> None:
    print(f"CPU: {cpu_name()}; one worker (the default runtime, concurrency = cores), the gateway and the clients")
    print(
        f"on one host; fair share {args.fair_share}; bulk: {args.clients} clients, max_in_flight "
        f"{args.max_in_flight}; interactive: one client, {rounds} rounds of {serial} requests per way, alternated"
    )
    for way in ("alone", "contended"):
        row = found[way]
        print(f"  interactive {way:<10} p50 {row['p50_ms']:8.2f} ms   p99 {row['p99_ms']:8.2f} ms")
    bulk = found["bulk"]
    print(f"  bulk while contended: {bulk['embedded_per_s']:.0f} texts/s embedded, {bulk['refused']} refused (429),"
          f" {bulk['other']} other answers; sent {bulk['sent']} = embedded {bulk['embedded']} + refused"
          f" {bulk['refused']} + other {bulk['other']}")  # fmt: skip
    ratio = found["p50_ratio"]
    lost = bulk["other"] or bulk["sent"] != bulk["embedded"] + bulk["refused"]
    print(f"  goal: contended p50 <= {GOAL_P50_RATIO:g}x alone: {ratio:.2f}x "
          f"({'met' if ratio <= GOAL_P50_RATIO else 'not met'}); nothing lost: {'NO' if lost else 'yes'}")  # fmt: skip
    write_report(args.out, "gateway_tenants", {"rounds": rounds, "serial": serial, "clients": args.clients,
                                               "max_in_flight": args.max_in_flight, "fair_share": args.fair_share,
                                               **found})  # fmt: skip


if __name__ == "__main__":
    main()

"""Prometheus exporter (`inference-tasks metrics`): what Flower lacks, read fresh on every scrape.

A separate small process, not an endpoint inside the workers: queue depth must be visible with
no worker running (a scaler scaling up from zero reads it, and a worker stuck on a backlog must
not delay its own alarm), one exporter serves a whole fleet, and a prefork worker's children
could not share one port anyway. Queue figures come from Redis (queue_state.py); thread, memory,
model-load and recycle figures from one broadcast to every worker's main process (control.py),
bounded by a timeout so a scrape never hangs on a dead worker. Nothing here imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from inference_tasks.redis_access import queue_state
from inference_tasks.redis_access.connections import broker_redis, result_redis

DEFAULT_BROADCAST_TIMEOUT_S = 1.0


RESULT_REDIS_UP = "1 if the results Redis (INFERENCE_RESULT_REDIS_URL) answered this scrape"


class InferenceCollector(Collector):
    def __init__(self, app: Any, broadcast_timeout: float = DEFAULT_BROADCAST_TIMEOUT_S) -> None:
        self.app = app
        self.broadcast_timeout = broadcast_timeout

    def collect(self) -> Iterator[Any]:
        started = time.perf_counter()
        yield from self._queue_metrics()
        if self.app.settings.results_apart:
            yield from self._result_redis_metrics()
        yield from self._worker_metrics()
        took = GaugeMetricFamily("inference_scrape_seconds", "Time this scrape took to read Redis and ask workers")
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _result_redis_metrics(self) -> Iterator[Any]:
        """Results' own Redis (INFERENCE_RESULT_REDIS_URL), where set: up, memory used and its limit."""
        try:
            memory = queue_state.redis_memory(result_redis(self.app.settings))
        except Exception:  # noqa: BLE001 - Redis down is itself the reading
            yield _gauge("inference_result_redis_up", RESULT_REDIS_UP, 0)
            return
        yield _gauge("inference_result_redis_up", RESULT_REDIS_UP, 1)
        yield _gauge("inference_result_redis_used_memory_bytes", "Memory results' own Redis uses", memory.used_bytes)
        yield _gauge(
            "inference_result_redis_maxmemory_bytes", "maxmemory of results' own Redis (0: none)", memory.max_bytes
        )

    def _queue_metrics(self) -> Iterator[Any]:
        up = GaugeMetricFamily("inference_redis_up", "1 if Redis answered this scrape")
        client = broker_redis(self.app.settings)
        try:
            queues = queue_state.snapshot(client, failures=0, queues=queue_state.fleet_queues(self.app.settings))
            memory = queue_state.redis_memory(client)
        except Exception:  # noqa: BLE001 - Redis down is itself the reading
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            "inference_queue_depth",
            "Messages waiting in a queue's Redis list for one priority (0 is served first)",
            labels=["queue", "priority", "model"],
        )
        total = GaugeMetricFamily(
            "inference_queue_depth_total", "Messages waiting in a queue, all priorities", labels=["queue", "model"]
        )
        totals: dict[str, int] = {}
        for entry in queues.depths:
            depth.add_metric([entry.queue, str(entry.priority), self._model_of(entry.queue)], entry.depth)
            totals[entry.queue] = totals.get(entry.queue, 0) + entry.depth
        for queue, count in totals.items():
            total.add_metric([queue, self._model_of(queue)], count)
        yield depth
        yield total
        yield _gauge(
            "inference_unacked_messages", "Messages delivered to a worker and not yet acknowledged", queues.unacked
        )
        yield _gauge(
            "inference_dead_letter_messages", "Refused raw messages kept in the dead-letter list", queues.dead_letters
        )
        yield _gauge("inference_redis_used_memory_bytes", "Memory Redis uses (INFO used_memory)", memory.used_bytes)
        yield _gauge(
            "inference_redis_maxmemory_bytes",
            "Redis' maxmemory (0: none set); at it, a noeviction Redis refuses writes",
            memory.max_bytes,
        )
        yield _gauge(
            "inference_recent_failures",
            "Failed tasks in the recent-failures list (capped)",
            queues.recent_failures_kept,
        )

    def _model_of(self, queue: str) -> str:
        """The alias of the model whose tasks `queue` holds; "" for training or an unreadable catalogue."""
        from inference_tasks.config.catalogue import model_of_queue
        from inference_tasks.config.checks import ConfigError

        try:
            return model_of_queue(queue, self.app.settings.catalogue) or ""
        except ConfigError:
            return ""

    def _worker_metrics(self) -> Iterator[Any]:
        from inference_tasks.ops.doctor import ask_workers
        from inference_tasks.ops.precision_report import precision_metric
        from inference_tasks.ops.runtime_report import runtime_metric

        try:
            replies = ask_workers(self.app, self.broadcast_timeout)
        except Exception:  # noqa: BLE001 - no broker: queue metrics already say so
            replies = {}
        workers = GaugeMetricFamily("inference_workers", "Workers that answered this scrape's broadcast")
        workers.add_metric([], len(replies))
        yield workers
        yield from _child_metrics(replies)
        yield from _cache_metrics(replies)
        yield from _host_metrics(replies)
        yield from precision_metric(replies)
        yield from runtime_metric(replies)


def _child_metrics(replies: dict[str, Any]) -> Iterator[Any]:
    """Per worker and child, from each worker's inference_processes reply."""
    child_labels = ["worker", "model", "slot"]
    os_threads = GaugeMetricFamily(
        "inference_child_os_threads", "Threads the kernel counts in a child", labels=child_labels
    )
    compute = GaugeMetricFamily(
        "inference_child_compute_threads",
        "Native compute threads a child's pools run (torch, BLAS, OpenMP)",
        labels=child_labels,
    )
    rss = GaugeMetricFamily("inference_child_rss_bytes", "Resident memory of a child", labels=child_labels)
    load = GaugeMetricFamily(
        "inference_worker_model_load_seconds",
        "Model load time in the worker's main process (preloaded)",
        labels=["worker", "model"],
    )
    runtime = GaugeMetricFamily(
        "inference_child_runtime_info",
        "1 per child: the model runtime (torch, openvino) and the precision it computes in (f32, bf16, f16)",
        labels=[*child_labels, "backend", "precision"],
    )
    exited = CounterMetricFamily(
        "inference_worker_children_exited",
        "Children that exited and were replaced (recycles, crashes)",
        labels=["worker"],
    )
    tokens = CounterMetricFamily(
        "inference_tokens",
        "Input tokens the model read for inference tasks (usage.tokens summed), per worker and model",
        labels=["worker", "model"],
    )
    for node, report in sorted(replies.items()):
        model = report.get("alias") or ""
        tokens.add_metric([node, model], report.get("tokens_served") or 0)
        for child in report["children"]:
            labels = [node, model, str(child["slot"])]
            os_threads.add_metric(labels, child["os_threads"])
            compute.add_metric(labels, child["compute_threads"])
            rss.add_metric(labels, child["rss_bytes"])
            runtime.add_metric([*labels, report.get("backend", "torch"), child.get("precision") or "unknown"], 1)
        if report.get("model_load_seconds") is not None:
            load.add_metric([node, model], report["model_load_seconds"])
        exited.add_metric([node], report.get("children_exited") or 0)
    yield from (os_threads, compute, rss, runtime, load, exited, tokens)


def _cache_metrics(replies: dict[str, Any]) -> Iterator[Any]:
    """Per worker and model, the embedding cache's counters since the worker started (workers with one)."""
    labels = ["worker", "model"]
    hits = CounterMetricFamily("inference_cache_hits", "Texts whose vector the embedding cache answered", labels=labels)
    misses = CounterMetricFamily(
        "inference_cache_misses", "Texts looked up in the embedding cache and computed", labels=labels
    )
    errors = CounterMetricFamily(
        "inference_cache_errors",
        "Embedding cache failures (down, slow, full) and entries that were not well-formed rows",
        labels=labels,
    )
    moved = CounterMetricFamily(
        "inference_cache_bytes", "Bytes of cache entries read and written", labels=[*labels, "direction"]
    )
    for node, report in sorted(replies.items()):
        counts = report.get("cache")
        if not counts:
            continue
        model = report.get("alias") or ""
        hits.add_metric([node, model], counts.get("hits", 0))
        misses.add_metric([node, model], counts.get("misses", 0))
        errors.add_metric([node, model], counts.get("errors", 0))
        moved.add_metric([node, model, "read"], counts.get("bytes_read", 0))
        moved.add_metric([node, model, "written"], counts.get("bytes_written", 0))
    yield from (hits, misses, errors, moved)


def _host_metrics(replies: dict[str, Any]) -> Iterator[Any]:
    """Per host: the workers' compute threads added up against the cores they may use."""
    from inference_tasks.ops.doctor import host_verdicts

    host_threads = GaugeMetricFamily(
        "inference_host_compute_threads", "Compute threads of every child on a host, added up", labels=["host"]
    )
    host_cores = GaugeMetricFamily("inference_host_cores", "Cores the workers on a host may use", labels=["host"])
    oversubscribed = GaugeMetricFamily(
        "inference_host_oversubscribed", "1 when a host's compute threads exceed its cores", labels=["host"]
    )
    for host in host_verdicts(replies):
        host_threads.add_metric([host.host], host.compute_threads)
        host_cores.add_metric([host.host], host.cores)
        oversubscribed.add_metric([host.host], int(host.compute_threads > host.cores))
    yield from (host_threads, host_cores, oversubscribed)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation)
    gauge.add_metric([], value)
    return gauge


def serve(app: Any, address: str, port: int, broadcast_timeout: float = DEFAULT_BROADCAST_TIMEOUT_S) -> None:
    """Serve /metrics until the process is stopped."""
    import threading

    from prometheus_client import start_http_server

    registry = CollectorRegistry()
    registry.register(InferenceCollector(app, broadcast_timeout))
    server, thread = start_http_server(port, addr=address, registry=registry)
    try:
        threading.Event().wait()
    finally:
        server.shutdown()
        thread.join()

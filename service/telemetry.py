"""Operations: Prometheus metrics and one access-log line per request, from one ASGI
middleware that times every request."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.cache import TableCache

access_log = logging.getLogger("service.access")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class CacheCollector(Collector):
    """The cache's statistics, read at scrape time."""

    def __init__(self, cache: Callable[[], TableCache | None]) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache()
        if cache is None:
            return
        stats = cache.stats()
        for name, value, text in [
            ("pe_cache_hits", stats.hits, "Table lookups answered from the cache."),
            ("pe_cache_misses", stats.misses, "Table lookups that computed rows."),
            ("pe_cache_evictions", stats.evictions, "Tables evicted to stay within the budget."),
            ("pe_cache_uncached", stats.uncached, "Tables computed but too large to keep."),
        ]:
            yield CounterMetricFamily(name, text, value=value)
        for name, value, text in [
            ("pe_cache_bytes", stats.bytes, "Bytes of tables held."),
            ("pe_cache_budget_bytes", stats.budget_bytes, "The cache budget (PE_CACHE_BYTES)."),
            ("pe_cache_entries", len(stats.entries), "Tables held."),
        ]:
            yield GaugeMetricFamily(name, text, value=value)


class Telemetry:
    """The app's own metrics registry: request counts and latency by route and status."""

    def __init__(self, cache: Callable[[], TableCache | None]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "pe_http_requests",
            "HTTP requests answered, by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "pe_http_request_duration_seconds",
            "Time from request to the end of the response, by method, route and status.",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(CacheCollector(cache))
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def series(self, method: str, route: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter and latency histogram of one label set (looked up once)."""
        key = (method, route, status)
        found = self._series.get(key)
        if found is None:
            labels = (method, route, str(status))
            found = self._series[key] = (
                self.requests.labels(*labels),
                self.latency.labels(*labels),
            )
        return found


def _route(scope: Scope, status: int) -> str:
    """The route template; the framework's own pages (/docs) by path. Paths nothing
    answered are not labels: any client could make them up."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    return "unmatched" if status in (404, 405) else str(scope["path"])


def format_access(record: dict[str, Any], as_json: bool) -> str:
    """One access-log line: JSON, or ``client "METHOD /path?query" status bytes ms``."""
    if as_json:
        return json.dumps(record, separators=(",", ":"))
    target = record["path"] + (f"?{record['query']}" if record["query"] else "")
    return (
        f'{record["client"]} "{record["method"]} {target}" {record["status"]} '
        f"{record['bytes']}B {record['duration_ms']}ms"
    )


class TelemetryMiddleware:
    """Counts, times and logs every HTTP request (pure ASGI: the body streams through)."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry, json_logs: bool) -> None:
        self.app = app
        self.telemetry = telemetry
        self.json_logs = json_logs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answer = {"status": 500, "bytes": 0}

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            elif message["type"] == "http.response.body":
                answer["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            self._record(scope, answer["status"], answer["bytes"], time.perf_counter() - start)

    def _record(self, scope: Scope, status: int, size: int, seconds: float) -> None:
        method, route = scope["method"], _route(scope, status)
        count, latency = self.telemetry.series(method, route, status)
        count.inc()
        latency.observe(seconds)
        if access_log.isEnabledFor(logging.INFO):
            client = scope.get("client")
            record = {
                "client": f"{client[0]}:{client[1]}" if client else "-",
                "method": method,
                "path": scope["path"],
                "query": scope.get("query_string", b"").decode("latin-1"),
                "route": route,
                "status": status,
                "bytes": size,
                "duration_ms": round(seconds * 1000, 3),
            }
            access_log.info(format_access(record, self.json_logs))


class JsonFormatter(logging.Formatter):
    """One JSON object a line. An access-log message is already a JSON object: its fields
    are merged in rather than nested as a string."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        message = record.getMessage()
        if record.name == access_log.name and message.startswith("{"):
            entry.update(json.loads(message))
        else:
            entry["message"] = message
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))

"""Operations: Prometheus metrics and one access-log line per request, from one ASGI
middleware that times every request.

Both sit on the hot path of every request, so neither goes through a general-purpose
machinery per request: request counts and latencies are plain counters that become
Prometheus samples when ``/metrics`` is scraped, and access-log lines are formatted with
one f-string and written in batches (at most 0.1 s late) instead of one write each.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, TextIO

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.cache import Cache

access_log = logging.getLogger("service.access")
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_LABELS = ["method", "route", "status"]
# in the scope of a request whose answer was cut off (service.pacing): counted as 499,
# the status of a request whose client did not take its answer, as nginx counts it
CUT_OFF: Final = "service.cut_off"
CLIENT_GONE: Final = 499
# requests the HTTP protocol refused before the app saw them (service.protocol), by status;
# the protocol is made per connection by uvicorn, so the count is the process's
REFUSED: Final[collections.Counter[int]] = collections.Counter()


class CacheCollector(Collector):
    """The cache's statistics, read at scrape time."""

    def __init__(self, cache: Callable[[], Cache | None]) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache()
        if cache is None:
            return
        stats = cache.stats()
        for name, value, text in [
            ("pe_cache_hits", stats.hits, "Table pages found in the cache."),
            ("pe_cache_misses", stats.misses, "Table pages computed."),
            ("pe_cache_evictions", stats.evictions, "Entries evicted to stay within the budget."),
            ("pe_cache_uncached", stats.uncached, "Requests whose rows were too many to keep."),
            ("pe_cache_response_hits", stats.response_hits, "Answers replayed from memory."),
        ]:
            yield CounterMetricFamily(name, text, value=value)
        for name, value, text in [
            ("pe_cache_bytes", stats.bytes, "Bytes held: tables and replayable answers."),
            ("pe_cache_budget_bytes", stats.budget_bytes, "The cache budget (PE_CACHE_BYTES)."),
            ("pe_cache_entries", stats.tables_total, "Tables with pages held."),
            ("pe_cache_pages", stats.table_pages, "Table pages held."),
        ]:
            yield GaugeMetricFamily(name, text, value=value)


class RequestStats(Collector):
    """Request counts and a latency histogram by method, route and status. Updated on the
    event loop only; turned into Prometheus samples when scraped."""

    def __init__(self) -> None:
        # (method, route, status) -> [count, sum of seconds, count per bucket]
        self._series: dict[tuple[str, str, str], tuple[list[float], list[int]]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = ([0.0, 0.0], [0] * (len(LATENCY_BUCKETS) + 1))
        totals, buckets = series
        totals[0] += 1
        totals[1] += seconds
        buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "pe_http_requests",
            "HTTP requests answered, by method, route and status.",
            labels=_LABELS,
        )
        latency = HistogramMetricFamily(
            "pe_http_request_duration_seconds",
            "Time from request to the end of the response, by method, route and status.",
            labels=_LABELS,
        )
        for labels, ((count, total), buckets) in list(self._series.items()):
            requests.add_metric(list(labels), count)
            cumulative, running = [], 0
            for bound, n in zip([*LATENCY_BUCKETS, float("inf")], buckets, strict=True):
                running += n
                cumulative.append((str(float(bound)) if bound != float("inf") else "+Inf", running))
            latency.add_metric(list(labels), cumulative, total)
        yield requests
        yield latency
        refused = CounterMetricFamily(
            "pe_http_refused",
            "Requests refused before the app saw them: malformed (400), a head too slow "
            "(408), a target or head too large (414, 431).",
            labels=["status"],
        )
        for status, count in sorted(REFUSED.items()):
            refused.add_metric([str(status)], count)
        yield refused


class Telemetry:
    """The app's own metrics registry: requests (by route and status) and the cache."""

    def __init__(self, cache: Callable[[], Cache | None]) -> None:
        self.registry = CollectorRegistry()
        self.requests = RequestStats()
        self.registry.register(self.requests)
        self.registry.register(CacheCollector(cache))


def _route(scope: Scope, status: int) -> str:
    """The route template; the framework's own pages (/docs) by their path. Anything else
    is "unmatched" (a redirect of an unknown path too): labels come from a closed set, as
    a client could make up any number of paths."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    app = scope.get("app")
    routes = getattr(app, "routes", ())
    if any(getattr(route, "path", None) == scope["path"] for route in routes):
        return str(scope["path"])
    return "unmatched"


def _escape(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def printable(text: str) -> str:
    """``text`` for a text log line: control and other unprintable characters, quotes and
    backslashes as escapes (``\\x0a``), so that no client can break a line, forge one or
    send escape sequences to a terminal."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c not in '"\\' else _escape(c) for c in text)


def format_access(record: dict[str, Any], as_json: bool) -> str:
    """One access-log line (without its newline): a JSON object, or
    ``time client "METHOD /path?query" status bytes ms`` with what the client sent escaped
    (see :func:`printable`)."""
    if as_json:
        return json.dumps(record, separators=(",", ":"))  # escapes every control character
    target = record["path"] + (f"?{record['query']}" if record["query"] else "")
    return (
        f'{record["time"]} {printable(record["client"])} "{printable(record["method"])} '
        f'{printable(target)}" {record["status"]} {record["bytes"]}B {record["duration_ms"]}ms'
    )


class AccessLog:
    """Access-log lines, written to ``stream`` in batches: the first line of a batch
    schedules a flush 0.1 s later, and a batch over 64 KiB is flushed at once."""

    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self._lines: list[str] = []
        self._size = 0
        self._second = -1
        self._stamp = ""
        self._zone = ""

    def now(self) -> str:
        moment = time.time()
        second = int(moment)
        if second != self._second:  # strftime once a second, not once a request
            self._second = second
            pattern = "%Y-%m-%dT%H:%M:%S" if self.as_json else "%Y-%m-%d %H:%M:%S"
            self._stamp = time.strftime(pattern, time.localtime(second))
            self._zone = iso_zone(time.localtime(second)) if self.as_json else ""
        return f"{self._stamp}.{int((moment - second) * 1000):03d}{self._zone}"

    def write(self, record: dict[str, Any]) -> None:
        if self.as_json:
            record = {"time": record["time"], "level": "info", "logger": access_log.name, **record}
        line = format_access(record, self.as_json) + "\n"
        if not self._lines:
            asyncio.get_running_loop().call_later(0.1, self.flush)
        self._lines.append(line)
        self._size += len(line)
        if self._size > 1 << 16:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            self.stream.write("".join(self._lines))
            self.stream.flush()
            self._lines.clear()
            self._size = 0


class TelemetryMiddleware:
    """Counts, times and logs every HTTP request (pure ASGI: the body streams through).
    The access log is on when the ``service.access`` logger is enabled for INFO."""

    def __init__(
        self, app: ASGIApp, telemetry: Telemetry, json_logs: bool, stream: TextIO | None = None
    ) -> None:
        self.app = app
        self.requests = telemetry.requests
        self.log = AccessLog(stream or sys.stdout, json_logs)
        self.logging = access_log.isEnabledFor(logging.INFO)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                try:
                    await self.app(scope, receive, send)
                finally:
                    self.log.flush()
                return
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answer = [500, 0]  # status, body bytes

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer[0] = message["status"]
            elif message["type"] == "http.response.body":
                answer[1] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            status = CLIENT_GONE if scope.get(CUT_OFF) else answer[0]
            self.record(scope, status, answer[1], time.perf_counter() - start)

    def record(self, scope: Scope, status: int, size: int, seconds: float) -> None:
        """Count, time and log one answered request."""
        method, route = scope["method"], _route(scope, status)
        self.requests.observe(method, route, status, seconds)
        if self.logging:
            client = scope.get("client")
            self.log.write(
                {
                    "time": self.log.now(),
                    "client": f"{client[0]}:{client[1]}" if client else "-",
                    "method": method,
                    "path": scope["path"],
                    "query": scope["query_string"].decode("latin-1"),
                    "route": route,
                    "status": status,
                    "bytes": size,
                    "duration_ms": round(seconds * 1000, 3),
                }
            )


def iso_zone(moment: time.struct_time) -> str:
    """The local time zone's offset at ``moment`` as ISO 8601 has it: ``+00:00``."""
    offset = time.strftime("%z", moment)
    return f"{offset[:3]}:{offset[3:]}"


class JsonFormatter(logging.Formatter):
    """One JSON object a line, for every other log record (PE_LOG_FORMAT=json)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}"
            + iso_zone(time.localtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))

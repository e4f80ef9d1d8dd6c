"""Prometheus metrics: requests by method, route and status with their latency, requests
the protocol refused, and the cache. ``GET /metrics`` renders :attr:`Telemetry.registry`.

One process: the values live in it, and the cache's figures are read when scraped.

Several worker processes (``PE_WORKERS`` > 1): prometheus-client's multiprocess mode.
``python -m service`` points ``PROMETHEUS_MULTIPROC_DIR`` at an empty directory before the
workers start; every value is kept in a memory-mapped file of its worker there, and a scrape
of any worker reads all of them. Counters and histograms are summed over every worker that
has run (one that exited keeps its counts: counters never go backwards), gauges over the
live ones. The request counters are written as requests end; each worker writes its cache's
figures once a second (:meth:`Telemetry.publish`), and the one scraped writes its own first.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import glob
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    multiprocess,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from service.cache import Cache, CacheStats

# the variables prometheus-client reads, when it is imported, to keep values in files: set
# (even empty), they switch it to that; python -m service checks what they name
DIRECTORY_VARIABLES: Final = ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")
MULTIPROCESS: Final = any(name in os.environ for name in DIRECTORY_VARIABLES)
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_LABELS = ["method", "route", "status"]
# (name, help, the CacheStats field) of the cache's counters and gauges
_CACHE_COUNTERS: Final = [
    ("pe_cache_hits", "Table pages found in the cache.", "hits"),
    ("pe_cache_misses", "Table pages computed.", "misses"),
    ("pe_cache_evictions", "Entries evicted to stay within the budget.", "evictions"),
    ("pe_cache_uncached", "Requests whose rows were too many to keep.", "uncached"),
    ("pe_cache_response_hits", "Answers replayed from memory.", "response_hits"),
]
_CACHE_GAUGES: Final = [
    ("pe_cache_bytes", "Bytes held: tables and replayable answers.", "bytes"),
    ("pe_cache_budget_bytes", "The cache budget (PE_CACHE_BYTES).", "budget_bytes"),
    ("pe_cache_entries", "Tables with pages held.", "tables_total"),
    ("pe_cache_pages", "Table pages held.", "table_pages"),
]
# requests the HTTP protocol refused before the app saw them (service.server.protocol), by status;
# the protocol is made per connection by uvicorn, so the count is the process's
REFUSED: Final = Counter(
    "pe_http_refused",
    "Requests refused before the app saw them: malformed (400), a head too slow (408), a "
    "target or head too large (414, 431).",
    ["status"],
    registry=None,
)
# the time each series was made: not a figure anyone graphs, and no worker's in particular
disable_created_metrics()  # type: ignore[no-untyped-call]
log = logging.getLogger(__name__)
_LIVE_GAUGE_FILE: Final = re.compile(r"gauge_live\w+?_(\d+)\.db")


class CacheCollector(Collector):
    """The cache's statistics, read at scrape time (one process)."""

    def __init__(self, cache: Callable[[], Cache | None]) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache()
        if cache is None:
            return
        stats = cache.stats(top=0)
        for name, text, field in _CACHE_COUNTERS:
            yield CounterMetricFamily(name, text, value=getattr(stats, field))
        for name, text, field in _CACHE_GAUGES:
            yield GaugeMetricFamily(name, text, value=getattr(stats, field))


_REQUESTS: Final = ("pe_http_requests", "HTTP requests answered, by method, route and status.")
_LATENCY: Final = (
    "pe_http_request_duration_seconds",
    "Time from request to the end of the response, by method, route and status.",
)


class RequestStats(Collector):
    """Request counts and a latency histogram by method, route and status, in one process:
    plain numbers updated on the event loop (a few times cheaper than prometheus-client's
    locked values, on every request), turned into samples when scraped."""

    def __init__(self) -> None:
        # (method, route, status) -> [count, sum of seconds], count per bucket; the status
        # made a label's text when scraped, not on every request
        self._series: dict[tuple[str, str, int], tuple[list[float], list[int]]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = ([0.0, 0.0], [0] * (len(LATENCY_BUCKETS) + 1))
        totals, buckets = series
        totals[0] += 1
        totals[1] += seconds
        buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(*_REQUESTS, labels=_LABELS)
        latency = HistogramMetricFamily(*_LATENCY, labels=_LABELS)
        for (method, route, status), ((count, total), buckets) in list(self._series.items()):
            labels = [method, route, str(status)]
            requests.add_metric(labels, count)
            cumulative, running = [], 0
            for bound, n in zip([*LATENCY_BUCKETS, float("inf")], buckets, strict=True):
                running += n
                cumulative.append(("+Inf" if bound == float("inf") else str(float(bound)), running))
            latency.add_metric(labels, cumulative, total)
        yield requests
        yield latency


class SharedRequestStats:
    """The same, kept by prometheus-client where every worker's values are read (several
    workers): the labelled series are kept by their labels, so that counting a request is
    two writes to memory-mapped files."""

    def __init__(self) -> None:
        self.requests = Counter(*_REQUESTS, _LABELS, registry=None)
        self.latency = Histogram(*_LATENCY, _LABELS, registry=None, buckets=LATENCY_BUCKETS)
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            labels = (method, route, str(status))
            series = self._series[key] = (
                self.requests.labels(*labels),
                self.latency.labels(*labels),
            )
        series[0].inc()
        series[1].observe(seconds)


class _CachePublisher:
    """A worker's cache figures, written to its files (several workers): counters advance
    by what the cache counted since the last time, gauges are set."""

    def __init__(self) -> None:
        self._counters = [
            (Counter(name, text, registry=None), field) for name, text, field in _CACHE_COUNTERS
        ]
        self._gauges = [
            (Gauge(name, text, registry=None, multiprocess_mode="livesum"), field)
            for name, text, field in _CACHE_GAUGES
        ]
        self._written: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()  # the loop's writes and a scrape's

    def write(self, cache: Cache) -> None:
        with self._lock:  # the figures read and written in turn: newer ones last
            self._write(cache.stats(top=0))

    def _write(self, stats: CacheStats) -> None:
        for counter, field in self._counters:
            value = getattr(stats, field)
            if value > self._written[field]:
                counter.inc(value - self._written[field])
                self._written[field] = value
        for gauge, field in self._gauges:
            gauge.set(getattr(stats, field))


class _Group(Collector):
    """Every worker's values, from their files; a worker that has exited leaves its counts,
    and its gauges are dropped first. The scraped worker writes its cache's figures first."""

    def __init__(self, before: Callable[[], None]) -> None:
        self._before = before
        self._path = next(os.environ[name] for name in DIRECTORY_VARIABLES if name in os.environ)
        self._files = multiprocess.MultiProcessCollector(  # type: ignore[no-untyped-call]
            None, self._path
        )

    def collect(self) -> Iterator[Metric]:
        self._before()
        for path in glob.glob(os.path.join(self._path, "gauge_live*.db")):
            match = _LIVE_GAUGE_FILE.fullmatch(os.path.basename(path))
            if match and not _alive(int(match.group(1))):
                # prometheus-client's mark_process_dead, but another scrape (of this worker
                # or another) may have removed it first
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        yield from self._files.collect()  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return True


class Telemetry:
    """The app's metrics registry: requests (by route and status) and the cache, of this
    process or of every worker (see the module docstring)."""

    def __init__(self, cache: Callable[[], Cache | None]) -> None:
        self.registry = CollectorRegistry()
        self._cache = cache
        self._publisher = _CachePublisher() if MULTIPROCESS else None
        self.requests: RequestStats | SharedRequestStats
        if self._publisher is not None:
            self.requests = SharedRequestStats()
            self.registry.register(_Group(self.publish))
            return
        self.requests = RequestStats()
        for collector in (self.requests, REFUSED, CacheCollector(cache)):
            self.registry.register(collector)

    def publish(self) -> None:
        """Write this worker's cache figures where the other workers read them (several
        workers; otherwise nothing to do)."""
        cache = self._cache()
        if self._publisher is not None and cache is not None:
            self._publisher.write(cache)

    async def publishing(self) -> None:
        """:meth:`publish` once a second, off the event loop, until cancelled (several
        workers; otherwise it returns at once). A failure is logged, and it goes on."""
        while self._publisher is not None:
            try:
                await asyncio.to_thread(self.publish)
            except Exception:
                log.exception("writing the cache's figures for /metrics failed")
            await asyncio.sleep(1)

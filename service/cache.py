"""A byte-bounded, thread-safe LRU cache of read-only encoding tables.

A table's values depend on ``(d_model, base, layout, dtype)`` and not on its length: the
table of ``max_len`` rows is the first ``max_len`` rows of any longer one. So the cache
keeps one table per key, with as many rows as have been asked for, and a request for more
rows computes only the missing ones. Concurrent misses on one key compute it once.

A table whose size alone is over the budget is computed and returned but not kept
(counted as ``uncached``); requests that arrive while it is being computed share it.

The same budget and LRU order also hold *responses*: any value with an ``nbytes`` (the
encoded bytes of a hot table answer), stored with :meth:`TableCache.remember` under a key
of its own and found with :meth:`TableCache.recall`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from service import core

Table = NDArray[np.floating]


@dataclass(frozen=True, slots=True)
class TableKey:
    """Everything that changes a table's values."""

    d_model: int
    base: float
    layout: core.Layout
    dtype: core.DType


Compute = Callable[[TableKey, int, int], Table]


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


def compute_rows(key: TableKey, start: int, stop: int) -> Table:
    """Rows ``start .. stop-1`` of ``key``'s table, from the core."""
    return core.encoding(start, stop, key.d_model, key.base, key.layout, key.dtype)


@dataclass(frozen=True, slots=True)
class EntryStats:
    key: TableKey
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class CacheStats:
    budget_bytes: int
    bytes: int
    hits: int
    misses: int
    evictions: int
    uncached: int
    entries: list[EntryStats] = field(default_factory=list)
    responses: int = 0
    response_bytes: int = 0
    response_hits: int = 0


@dataclass(slots=True)
class _Flight:
    """Coordinates the requests for one key that missed: one computes, the rest wait."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0
    result: Table | None = None


class TableCache:
    """Least-recently-used tables within ``budget_bytes``; see the module docstring."""

    def __init__(self, budget_bytes: int, compute: Compute = compute_rows) -> None:
        self.budget_bytes = budget_bytes
        self._compute = compute
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Sized] = OrderedDict()
        self._flights: dict[TableKey, _Flight] = {}
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._uncached = 0
        self._response_hits = 0

    def peek(self, key: TableKey, rows: int) -> Table | None:
        """The cached table if it has at least ``rows`` rows (a hit), else ``None``.

        Never computes, so it is cheap enough to call on an event loop.
        """
        with self._lock:
            return self._hit(key, rows)

    def get(self, key: TableKey, rows: int) -> Table:
        """A read-only table of ``key`` with at least ``rows`` rows, computed if needed.

        Blocks while computing: call it from a worker thread.
        """
        with self._lock:
            table = self._hit(key, rows)
            if table is not None:
                return table
            flight = self._flights.setdefault(key, _Flight())
            flight.users += 1
        try:
            with flight.lock:
                return self._fill(key, rows, flight)
        finally:
            with self._lock:
                flight.users -= 1
                if flight.users == 0:
                    del self._flights[key]

    def _fill(self, key: TableKey, rows: int, flight: _Flight) -> Table:
        with self._lock:
            table = self._hit(key, rows)
            if table is None and flight.result is not None and len(flight.result) >= rows:
                self._hits += 1
                table = flight.result
            if table is not None:
                return table
            stored = self._entries.get(key)
            prefix = stored if isinstance(stored, np.ndarray) else None
            self._misses += 1
        have = 0 if prefix is None else len(prefix)
        rest = self._compute(key, have, rows)
        table = rest if prefix is None else np.concatenate((prefix, rest))
        table.flags.writeable = False
        flight.result = table
        with self._lock:
            self._store(key, table)
        return table

    def remember(self, key: Hashable, value: Sized) -> None:
        """Keep ``value`` (not a table) under ``key``, within the same budget."""
        if value.nbytes <= self.budget_bytes:
            with self._lock:
                self._store(key, value)

    def recall(self, key: Hashable) -> Sized | None:
        """The value :meth:`remember` kept under ``key``, if it is still there."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
                self._response_hits += 1
            return value

    def _hit(self, key: TableKey, rows: int) -> Table | None:
        table = self._entries.get(key)
        if not isinstance(table, np.ndarray) or len(table) < rows:
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return table

    def _store(self, key: Hashable, table: Sized) -> None:
        if table.nbytes > self.budget_bytes:
            self._uncached += 1
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._entries[key] = table
        self._bytes += table.nbytes
        while self._bytes > self.budget_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes
            self._evictions += 1

    def stats(self) -> CacheStats:
        """A consistent snapshot; entries from least to most recently used."""
        with self._lock:
            tables = [(k, v) for k, v in self._entries.items() if isinstance(v, np.ndarray)]
            responses = [v.nbytes for v in self._entries.values() if not isinstance(v, np.ndarray)]
            return CacheStats(
                budget_bytes=self.budget_bytes,
                bytes=self._bytes,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                uncached=self._uncached,
                entries=[
                    EntryStats(k, len(t), t.nbytes) for k, t in tables if isinstance(k, TableKey)
                ],
                responses=len(responses),
                response_bytes=sum(responses),
                response_hits=self._response_hits,
            )

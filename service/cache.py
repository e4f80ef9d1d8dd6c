"""A byte-bounded, thread-safe LRU cache of table pages, and of other values in the same
budget (the replayed answers).

A table's rows depend on its family key and their position only, so the cache keeps
**pages**: the rows ``page * R .. page * R + R - 1`` of a key's table, where ``R`` is the
largest power of two whose rows fit in :data:`PAGE_BYTES` (or in a sixteenth of the budget
if that is less, so a small budget still holds several pages), and at least one row however
wide. A request for rows ``start .. stop`` computes only the pages it touches that are
missing, consecutive missing pages in one computation, and each page is computed once
however many requests miss it at the same time (single flight: if that computation fails,
the requests waiting for it fail with it, and later ones compute again). A request whose
pages would not fit in the whole budget is computed for its rows alone and not kept
(counted as ``uncached``).
"""

from __future__ import annotations

import heapq
import mmap
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np

from service.encodings import registry
from service.encodings.registry import Key, Rows
from service.flight import Flight

PAGE_BYTES: Final = 256 << 10
_MAPPED_BYTES: Final = 64 << 10
Fill = Callable[[Key, int, Sequence[Rows]], None]


@dataclass(frozen=True, slots=True)
class _PageKey:
    key: Key
    page: int


@dataclass(frozen=True, slots=True)
class _SpanKey:
    key: Key
    start: int
    stop: int


@dataclass(slots=True)
class _Entry:
    value: Any
    nbytes: int
    table: Key | None  # the family key of a page; None for any other value


@dataclass(frozen=True, slots=True)
class TableStats:
    key: Key
    pages: int
    bytes: int


@dataclass(frozen=True, slots=True)
class CacheStats:
    budget_bytes: int
    bytes: int
    hits: int
    misses: int
    evictions: int
    uncached: int
    tables: list[TableStats]
    tables_total: int
    table_pages: int
    responses: int
    response_bytes: int
    response_hits: int


class Cache:
    """Pages of tables and other values, least recently used first out, within
    ``budget_bytes``; see the module docstring."""

    def __init__(self, budget_bytes: int, fill: Fill | None = None) -> None:
        self.budget_bytes = budget_bytes
        self.page_bytes = max(1, min(PAGE_BYTES, budget_bytes // 16))
        self._fill = fill or registry.fill
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._flights: dict[Hashable, Flight[Rows]] = {}
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._uncached = 0
        self._response_hits = 0
        self._tables: dict[Key, list[int]] = {}  # pages and bytes held, per family key

    def page_rows(self, key: Key) -> int:
        """Rows in each page of ``key``'s table: a power of two, at least 1."""
        fits = max(1, self.page_bytes // registry.row_bytes(key))
        return 1 << (fits.bit_length() - 1)

    def peek(self, key: Key, start: int, stop: int) -> list[Rows] | None:
        """Rows ``start .. stop`` as consecutive read-only blocks if every page is here
        (hits), else ``None``. Never computes, so it is cheap enough for an event loop."""
        size = self.page_rows(key)
        pages = range(start // size, (stop - 1) // size + 1)
        have = {}
        with self._lock:
            for page in pages:
                entry = self._entries.get(_PageKey(key, page))
                if entry is None:
                    return None
                have[page] = entry.value
            for page in pages:
                self._entries.move_to_end(_PageKey(key, page))
            self._hits += len(pages)
        return _blocks(have, size, start, stop)

    def rows(self, key: Key, start: int, stop: int) -> list[Rows]:
        """Rows ``start .. stop`` of ``key``'s table as consecutive read-only blocks (one
        per page touched), computing the missing pages. Blocks while computing or waiting:
        call it from a worker thread."""
        size = self.page_rows(key)
        first, last = start // size, (stop - 1) // size
        if (last - first + 1) * size * registry.row_bytes(key) > self.budget_bytes:
            return [self._uncached_rows(key, start, stop)]
        have: dict[int, Rows] = {}
        mine, theirs = self._claim(key, range(first, last + 1), have)
        self._compute(key, size, mine, have)
        for page, flight in theirs:
            have[page] = flight.outcome()
        return _blocks(have, size, start, stop)

    def _claim(
        self, key: Key, pages: range, have: dict[int, Rows]
    ) -> tuple[list[tuple[int, Flight[Rows]]], list[tuple[int, Flight[Rows]]]]:
        """Takes the cached pages into ``have``; returns the missing pages this request
        computes and those another request is computing."""
        mine, theirs = [], []
        with self._lock:
            for page in pages:
                if page in have:
                    continue
                name = _PageKey(key, page)
                entry = self._entries.get(name)
                if entry is not None:
                    self._entries.move_to_end(name)
                    self._hits += 1
                    have[page] = entry.value
                elif name in self._flights:
                    theirs.append((page, self._flights[name]))
                else:
                    mine.append((page, self._flights.setdefault(name, Flight())))
                    self._misses += 1
        return mine, theirs

    def _compute(
        self, key: Key, size: int, mine: list[tuple[int, Flight[Rows]]], have: dict[int, Rows]
    ) -> None:
        """Computes the claimed pages, each run of consecutive ones in one call."""
        runs: list[list[tuple[int, Flight[Rows]]]] = []
        for claim in mine:
            if runs and runs[-1][-1][0] + 1 == claim[0]:
                runs[-1].append(claim)
            else:
                runs.append([claim])
        try:
            for run in runs:
                arrays = [_page(size, key) for _ in run]
                self._fill(key, run[0][0] * size, arrays)
                with self._lock:
                    for (page, flight), array in zip(run, arrays, strict=True):
                        array.flags.writeable = False
                        self._store(
                            _PageKey(key, page),
                            _Entry(array, array.nbytes + registry.key_bytes(key), key),
                        )
                        flight.result = have[page] = array
                        self._land(_PageKey(key, page), flight)
        except BaseException as error:  # the waiters share it; later requests compute again
            with self._lock:
                for page, flight in mine:
                    if flight.result is None:
                        flight.error = error
                        self._land(_PageKey(key, page), flight)
            raise

    def _uncached_rows(self, key: Key, start: int, stop: int) -> Rows:
        """Rows too many to keep: computed once for everyone asking at the same time."""
        name = _SpanKey(key, start, stop)
        with self._lock:
            flight = self._flights.get(name)
            if flight is not None:
                theirs = flight
            else:
                theirs, flight = None, self._flights.setdefault(name, Flight())
                self._uncached += 1
        if theirs is not None:
            return theirs.outcome()
        try:
            out = np.empty((stop - start, key.width), dtype=key.dtype)
            self._fill(key, start, [out])
            out.flags.writeable = False
            flight.result = out
            return out
        except BaseException as error:
            flight.error = error
            raise
        finally:
            with self._lock:
                self._land(name, flight)

    def _land(self, name: Hashable, flight: Flight[Rows]) -> None:
        if self._flights.get(name) is flight:
            del self._flights[name]
        flight.land()

    def remember(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Keep ``value`` (not a page), counted as ``nbytes``, in the same budget."""
        if nbytes <= self.budget_bytes:
            with self._lock:
                self._store(key, _Entry(value, nbytes, None))

    def recall(self, key: Hashable, largest: int | None = None) -> Any:
        """The value :meth:`remember` kept under ``key``, if it is still there (and counted
        as no more than ``largest`` bytes, if given), else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (largest is not None and entry.nbytes > largest):
                return None
            self._entries.move_to_end(key)
            self._response_hits += 1
            return entry.value

    def _store(self, name: Hashable, entry: _Entry) -> None:
        if entry.nbytes > self.budget_bytes:
            return
        old = self._entries.pop(name, None)
        if old is not None:
            self._count(old, -1)
        self._entries[name] = entry
        self._count(entry, 1)
        while self._bytes > self.budget_bytes:
            self._count(self._entries.popitem(last=False)[1], -1)
            self._evictions += 1

    def _count(self, entry: _Entry, sign: int) -> None:
        self._bytes += sign * entry.nbytes
        if entry.table is not None:
            held = self._tables.setdefault(entry.table, [0, 0])
            held[0] += sign
            held[1] += sign * entry.nbytes
            if not held[0]:
                del self._tables[entry.table]

    def stats(self, top: int = 20) -> CacheStats:
        """A consistent snapshot, with the ``top`` tables holding the most bytes; costs the
        number of tables held, not of entries."""
        with self._lock:
            held = [TableStats(key, pages, size) for key, (pages, size) in self._tables.items()]
            pages = sum(table.pages for table in held)
            table_bytes = sum(table.bytes for table in held)
            stats = CacheStats(
                budget_bytes=self.budget_bytes,
                bytes=self._bytes,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                uncached=self._uncached,
                tables=[],
                tables_total=len(held),
                table_pages=pages,
                responses=len(self._entries) - pages,
                response_bytes=self._bytes - table_bytes,
                response_hits=self._response_hits,
            )
        return replace(stats, tables=heapq.nlargest(top, held, key=lambda table: table.bytes))


def _page(rows: int, key: Key) -> Rows:
    """A page's array; one of 64 KiB or more in a mapping of its own, which goes back to the
    system once evicted (in the heap it leaves holes: 256 MiB of pages held 297 MiB)."""
    dtype = np.dtype(key.dtype)
    count = rows * key.width
    if count * dtype.itemsize < _MAPPED_BYTES:
        return np.empty((rows, key.width), dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, count * dtype.itemsize), dtype, count).reshape(rows, -1)


def _blocks(pages: dict[int, Rows], size: int, start: int, stop: int) -> list[Rows]:
    """The parts of consecutive pages that hold rows ``start .. stop``, in order."""
    first, last = start // size, (stop - 1) // size
    return [
        pages[page][max(start - page * size, 0) : min(stop - page * size, size)]
        for page in range(first, last + 1)
    ]

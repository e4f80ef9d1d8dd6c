"""The paged cache: pages computed once and only where asked, the budget and LRU order
shared with other values, single flight under concurrency, failures retried."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from service.cache import PAGE_BYTES, Cache
from service.encodings import registry
from service.encodings.registry import DType, Key, Rows
from service.encodings.sinusoidal import SinusoidalKey
from service.flight import ComputationFailed


def key(d_model: int = 8, dtype: DType = "float32", base: float = 10000.0) -> SinusoidalKey:
    return SinusoidalKey(d_model, base, "interleaved", dtype)


class Recorder:
    """``registry.fill`` that records its calls (key, first row, rows) and can be slowed
    down or made to fail."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[Key, int, int]] = []
        self.delay = delay
        self.fail = False
        self._lock = threading.Lock()

    def __call__(self, k: Key, start: int, out: Sequence[Rows]) -> None:
        with self._lock:
            self.calls.append((k, start, sum(len(part) for part in out)))
            failing = self.fail  # as it is when the computation starts
        time.sleep(self.delay)
        if failing:
            raise RuntimeError("compute failed")
        registry.fill(k, start, out)


def whole(k: SinusoidalKey, start: int, stop: int) -> Rows:
    return registry.rows(k, start, stop)


def test_pages_are_a_power_of_two_of_rows_within_the_page_size() -> None:
    cache = Cache(512 << 20)
    assert cache.page_rows(key(512)) == 128  # 2 KiB rows, 256 KiB pages
    assert cache.page_rows(key(1000, "float64")) == 32  # 8000-byte rows: 32 of them fit
    assert cache.page_rows(key(1 << 20)) == 1  # a row larger than a page is a page
    assert cache.page_rows(key(2)) * 8 == PAGE_BYTES
    assert Cache(160_000).page_rows(key(8)) == 256  # small budgets: pages of budget/16


def test_a_miss_computes_its_page_and_a_hit_does_not() -> None:
    compute = Recorder()
    cache = Cache(1 << 20, compute)
    k = key()
    size = cache.page_rows(k)
    first = cache.rows(k, 3, 10)
    second = cache.rows(k, 0, 10)
    assert compute.calls == [(k, 0, size)]
    assert np.array_equal(first[0], whole(k, 3, 10))
    assert np.array_equal(second[0], whole(k, 0, 10))
    assert np.shares_memory(first[0], second[0])
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.bytes) == (1, 1, size * 8 * 4)


def test_peek_never_computes() -> None:
    compute = Recorder()
    cache = Cache(1 << 20, compute)
    k = key(512)
    assert cache.peek(k, 0, 4) is None
    cache.rows(k, 0, 4)
    assert cache.peek(k, 0, 4) is not None
    assert cache.peek(k, 127, 129) is None  # the second page is not there
    assert len(compute.calls) == 1
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)


def test_only_the_pages_a_request_touches_are_computed() -> None:
    """Rows 999,990 .. 999,999 cost one page, not the million rows before them."""
    compute = Recorder()
    cache = Cache(1 << 30, compute)
    k = key(64, "float64")
    size = cache.page_rows(k)
    parts = cache.rows(k, 999_990, 1_000_000)
    assert compute.calls == [(k, 999_990 // size * size, size)]
    assert np.array_equal(np.concatenate(parts), whole(k, 999_990, 1_000_000))
    assert cache.stats().bytes == size * 64 * 8


def test_missing_pages_are_computed_in_runs_and_kept_apart() -> None:
    compute = Recorder()
    cache = Cache(1 << 30, compute)
    k = key(512)  # 128 rows a page
    cache.rows(k, 256, 300)  # page 2
    parts = cache.rows(k, 10, 700)  # pages 0 .. 5: 0-1 and 3-5 are missing
    assert compute.calls == [(k, 256, 128), (k, 0, 256), (k, 384, 384)]
    assert [len(part) for part in parts] == [118, 128, 128, 128, 128, 60]
    assert np.array_equal(np.concatenate(parts), whole(k, 10, 700))
    assert all(not part.flags.writeable for part in parts)
    assert [t.pages for t in cache.stats().tables] == [6]


def test_cached_pages_are_read_only() -> None:
    part = Cache(1 << 20).rows(key(), 0, 3)[0]
    with pytest.raises(ValueError, match="read-only"):
        part[0, 0] = 1.0


def test_least_recently_used_pages_are_evicted_first() -> None:
    cache = Cache(16 * 4096)  # pages of 4096 bytes: one row of 1024 float32
    a, b, c = key(1024), key(1024, base=100.0), key(1024, base=200.0)
    assert cache.page_rows(a) == 1
    cache.rows(a, 0, 8)
    cache.rows(b, 0, 8)
    cache.rows(a, 0, 8)  # a is now the most recent
    cache.rows(c, 0, 1)  # a seventeenth page: b's first goes
    stats = cache.stats()
    assert {t.key: t.pages for t in stats.tables} == {b: 7, a: 8, c: 1}
    assert stats.evictions == 1
    assert stats.bytes == 16 * 4096 == stats.budget_bytes
    assert cache.peek(b, 0, 1) is None
    assert cache.peek(b, 1, 8) is not None


def test_the_budget_is_never_exceeded() -> None:
    cache = Cache(50_000)
    for d_model in range(1, 60):
        cache.rows(key(d_model), 0, 10)
        stats = cache.stats(top=100)
        assert stats.bytes <= 50_000
        assert stats.bytes == sum(t.bytes for t in stats.tables)
    assert cache.stats().evictions > 0


def test_rows_whose_pages_pass_the_budget_are_served_but_not_kept() -> None:
    compute = Recorder()
    cache = Cache(16_000, compute)
    k = key(100)  # 400-byte rows, 2 rows a page
    rows = cache.rows(k, 5, 50)
    assert compute.calls == [(k, 5, 45)]  # exactly the rows asked for
    assert np.array_equal(rows[0], whole(k, 5, 50))
    stats = cache.stats()
    assert (stats.tables, stats.bytes, stats.uncached, stats.misses) == ([], 0, 1, 0)


@pytest.mark.parametrize(
    ("budget", "rows"),
    [pytest.param(1 << 30, (0, 300), id="pages"), pytest.param(1000, (0, 300), id="uncached")],
)
def test_concurrent_misses_compute_once(budget: int, rows: tuple[int, int]) -> None:
    compute = Recorder(delay=0.2)
    cache = Cache(budget, compute)
    k = key(512)
    barrier = threading.Barrier(32)

    def request() -> list[Rows]:
        barrier.wait()
        return cache.rows(k, *rows)

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: request(), range(32)))
    assert len(compute.calls) == 1
    for parts in results:
        assert np.array_equal(np.concatenate(parts), whole(k, *rows))
        assert all(np.shares_memory(p, q) for p, q in zip(parts, results[0], strict=True))


def test_overlapping_requests_share_their_pages() -> None:
    """Each page is computed once, whichever request claims it first."""
    compute = Recorder(delay=0.1)
    cache = Cache(1 << 30, compute)
    k = key(512)
    spans = [(0, 500), (200, 900), (700, 1000), (0, 1000)] * 4
    with ThreadPoolExecutor(len(spans)) as pool:
        results = list(pool.map(lambda span: cache.rows(k, *span), spans))
    computed = sorted(start // 128 + i for _, start, n in compute.calls for i in range(n // 128))
    assert computed == list(range(8))
    for (start, stop), parts in zip(spans, results, strict=True):
        assert np.array_equal(np.concatenate(parts), whole(k, start, stop))


def test_a_failed_computation_is_not_cached_and_is_retried() -> None:
    compute = Recorder()
    compute.fail = True
    cache = Cache(1 << 20, compute)
    with pytest.raises(RuntimeError):
        cache.rows(key(), 0, 5)
    compute.fail = False
    assert np.array_equal(cache.rows(key(), 0, 5)[0], whole(key(), 0, 5))
    assert len(compute.calls) == 2
    assert cache.stats().misses == 2


@pytest.mark.parametrize("budget", [1 << 20, 100], ids=["pages", "uncached"])
def test_waiters_share_a_failure_and_later_requests_compute_again(budget: int) -> None:
    """A failed computation is not repeated by every request that waited for it (under
    memory pressure that would make things worse); it is not kept either."""
    compute = Recorder(delay=0.2)
    compute.fail = True
    cache = Cache(budget, compute)
    k = key()
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def request() -> None:
        barrier.wait()
        try:
            cache.rows(k, 0, 5)
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=request) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(compute.calls) == 1
    assert sorted(type(error).__name__ for error in errors) == [
        "ComputationFailed",
        "ComputationFailed",
        "ComputationFailed",
        "RuntimeError",
    ]
    assert all(
        isinstance(error, ComputationFailed) is (error.__cause__ is not None) for error in errors
    )
    compute.fail = False
    assert np.array_equal(cache.rows(k, 0, 5)[0], whole(k, 0, 5))
    assert len(compute.calls) == 2


def test_other_values_share_the_budget_and_the_lru_order() -> None:
    page = 4096
    cache = Cache(16 * page)
    cache.remember(("r", 1), "one", 6 * page)
    cache.rows(key(1024), 0, 4)  # four pages
    cache.remember(("r", 2), "two", 6 * page)
    assert cache.recall(("r", 1)) == "one"  # now the most recent
    cache.remember(("r", 3), "three", 4 * page)  # evicts the pages: least recent
    stats = cache.stats()
    assert stats.tables == []
    assert (stats.responses, stats.response_bytes) == (3, 16 * page)
    assert (stats.evictions, stats.response_hits) == (4, 1)
    cache.remember(("r", 4), "four", 6 * page)  # evicts r2, the least recent
    assert cache.recall(("r", 2)) is None
    assert (cache.recall(("r", 1)), cache.recall(("r", 3))) == ("one", "three")
    cache.remember(("r", 5), "huge", 17 * page)  # over the whole budget: not kept
    assert cache.recall(("r", 5)) is None
    assert cache.stats().bytes == 16 * page


def test_the_listing_is_bounded_and_counts_every_table() -> None:
    cache = Cache(1 << 30)
    for d_model in range(1, 101):
        cache.rows(key(d_model), 0, 1)
    cache.remember(("answer",), b"x", 1000)
    stats = cache.stats(top=5)
    sizes = sorted((cache.page_rows(key(d)) * 4 * d for d in range(1, 101)), reverse=True)
    assert [t.bytes for t in stats.tables] == sizes[:5]  # the largest
    assert (stats.tables_total, stats.table_pages, stats.responses) == (100, 100, 1)
    assert (stats.response_bytes, stats.bytes) == (1000, 1000 + sum(sizes))

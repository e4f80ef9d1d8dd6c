from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from service import core
from service.cache import Table, TableCache, TableKey, compute_rows


def key(d_model: int = 8, dtype: core.DType = "float32") -> TableKey:
    return TableKey(d_model, 10000.0, "interleaved", dtype)


class Recorder:
    """``compute_rows`` that records its calls and can be slowed down or made to fail."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[TableKey, int, int]] = []
        self.delay = delay
        self.fail = False
        self._lock = threading.Lock()

    def __call__(self, k: TableKey, start: int, stop: int) -> Table:
        with self._lock:
            self.calls.append((k, start, stop))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("compute failed")
        return compute_rows(k, start, stop)


def test_a_miss_computes_and_a_hit_does_not() -> None:
    compute = Recorder()
    cache = TableCache(1 << 20, compute)
    first = cache.get(key(), 10)
    second = cache.get(key(), 10)
    assert second is first
    assert compute.calls == [(key(), 0, 10)]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.bytes) == (1, 1, 10 * 8 * 4)
    assert np.array_equal(first, core.encoding(0, 10, 8))


def test_peek_never_computes() -> None:
    compute = Recorder()
    cache = TableCache(1 << 20, compute)
    assert cache.peek(key(), 4) is None
    cache.get(key(), 4)
    assert cache.peek(key(), 4) is not None
    assert cache.peek(key(), 5) is None
    assert len(compute.calls) == 1
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)


def test_a_longer_table_computes_only_the_missing_rows() -> None:
    compute = Recorder()
    cache = TableCache(1 << 20, compute)
    cache.get(key(), 4)
    longer = cache.get(key(), 10)
    shorter = cache.get(key(), 7)
    assert compute.calls == [(key(), 0, 4), (key(), 4, 10)]
    assert shorter is longer
    assert np.array_equal(longer, core.encoding(0, 10, 8))
    assert [e.rows for e in cache.stats().entries] == [10]
    assert cache.stats().bytes == longer.nbytes


def test_cached_tables_are_read_only() -> None:
    cache = TableCache(1 << 20)
    table = cache.get(key(), 3)
    assert not table.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        table[0, 0] = 1.0


def test_least_recently_used_is_evicted_first() -> None:
    size = 10 * 8 * 4
    cache = TableCache(2 * size)
    a, b, c = key(8), TableKey(8, 100.0, "interleaved", "float32"), key(8, "float16")
    cache.get(a, 10)
    cache.get(b, 10)
    cache.get(a, 10)  # a is now the most recent
    cache.get(c, 20)  # float16: 20 rows are the same size as 10 float32 rows
    stats = cache.stats()
    assert [e.key for e in stats.entries] == [a, c]
    assert stats.evictions == 1
    assert stats.bytes == 2 * size <= stats.budget_bytes


def test_the_budget_is_never_exceeded() -> None:
    cache = TableCache(5000)
    for d_model in range(1, 60):
        cache.get(key(d_model), 10)
        stats = cache.stats()
        assert stats.bytes <= 5000
        assert stats.bytes == sum(e.bytes for e in stats.entries)
    assert cache.stats().evictions > 0


def test_a_table_over_the_budget_is_served_but_not_kept() -> None:
    cache = TableCache(100)
    table = cache.get(key(), 10)
    assert table.shape == (10, 8)
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.uncached, stats.misses) == ([], 0, 1, 1)


@pytest.mark.parametrize(
    "budget", [pytest.param(1 << 20, id="kept"), pytest.param(10, id="uncached")]
)
def test_concurrent_misses_on_one_key_compute_once(budget: int) -> None:
    compute = Recorder(delay=0.2)
    cache = TableCache(budget, compute)
    barrier = threading.Barrier(32)

    def request() -> Table:
        barrier.wait()
        return cache.get(key(), 100)

    with ThreadPoolExecutor(32) as pool:
        tables = list(pool.map(lambda _: request(), range(32)))
    assert compute.calls == [(key(), 0, 100)]
    assert all(t is tables[0] for t in tables)
    stats = cache.stats()
    assert (stats.misses, stats.hits) == (1, 31)


def test_a_failed_computation_is_not_cached_and_is_retried() -> None:
    compute = Recorder()
    compute.fail = True
    cache = TableCache(1 << 20, compute)
    with pytest.raises(RuntimeError):
        cache.get(key(), 5)
    compute.fail = False
    assert cache.get(key(), 5).shape == (5, 8)
    assert len(compute.calls) == 2
    assert cache.stats().misses == 2


class Blob:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def test_other_values_share_the_budget_and_the_lru_order() -> None:
    cache = TableCache(1000)
    cache.remember(("r", 1), Blob(400))
    cache.get(key(4), 10)  # 160 bytes
    cache.remember(("r", 2), Blob(400))
    assert cache.recall(("r", 1)) is not None  # now the most recent
    cache.remember(("r", 3), Blob(300))  # evicts the table, then r2: least recently used
    stats = cache.stats()
    assert stats.entries == []
    assert (stats.responses, stats.response_bytes, stats.bytes) == (2, 700, 700)
    assert (stats.evictions, stats.response_hits) == (2, 1)
    assert cache.recall(("r", 2)) is None
    assert cache.recall(("r", 1)) is not None
    cache.remember(("r", 4), Blob(2000))  # over the whole budget: not kept
    assert cache.recall(("r", 4)) is None
    assert cache.get(key(4), 10) is not None  # a table under a response key never collides

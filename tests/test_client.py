"""The Python client against a real server: sync and async, tables, applies, problems."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import numpy as np
import pytest

from service.client import AsyncClient, Client, ProblemError
from service.encodings import additive, registry
from service.encodings.registry import DType
from service.encodings.sinusoidal import Layout, SinusoidalKey, preset_key


def encoding(
    start: int,
    stop: int,
    d_model: int,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    dtype: DType = "float32",
) -> np.ndarray[tuple[int, int], np.dtype[np.floating]]:
    return registry.rows(SinusoidalKey(d_model, base, layout, dtype), start, stop)


@pytest.fixture
def client(live_url: str) -> Iterator[Client]:
    with Client(live_url) as pe:
        yield pe


def test_table(client: Client) -> None:
    table = client.table(100, 16, base=100.0, dtype="float64", layout="split")
    assert table.flags.writeable
    assert np.array_equal(table, encoding(0, 100, 16, 100.0, "split", "float64"))


def test_table_block(client: Client) -> None:
    block = client.table(100, 16, start=10, stop=20, dim_start=4, dim_stop=8)
    assert np.array_equal(block, encoding(0, 100, 16)[10:20, 4:8])


def test_apply(client: Client) -> None:
    x = np.random.default_rng(0).standard_normal((2, 8, 6)).astype(np.float32)
    y = client.apply(x, offset=3, scale=0.5)
    assert np.array_equal(y, additive.apply(x, encoding(3, 11, 6), 0.5))


def test_apply_with_position_ids(client: Client) -> None:
    x = np.zeros((2, 3, 4), np.float64)
    ids = np.array([[0, 1, 2], [7, 7, 9]])
    y = client.apply(x, position_ids=ids, max_len=10)
    assert np.array_equal(y, encoding(0, 10, 4, dtype="float64")[ids])


def test_any_familys_table_by_its_key(client: Client) -> None:
    key = SinusoidalKey(12, 500.0, "split", "float16")
    block = client.encoding(key, 2**31, start=2**31 - 5, dim_start=3)
    assert np.array_equal(block, registry.rows(key, 2**31 - 5, 2**31)[:, 3:])


def test_errors_carry_the_problem(client: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        client.table(10**7, 10**4)
    assert caught.value.status == 422
    assert caught.value.problem["setting"] == "PE_MAX_ELEMENTS"
    assert caught.value.type.endswith("limit-exceeded")
    with pytest.raises(ProblemError) as caught:
        client.apply(np.zeros((3, 4), np.int32))
    assert caught.value.status == 422
    assert "int32" in caught.value.detail


def test_cache_stats_and_readiness(client: Client) -> None:
    before = client.cache_stats()
    client.table(5, 5, base=5.5)
    after = client.cache_stats()
    client.table(5, 5, base=5.5, start=1)
    again = client.cache_stats()
    assert client.ready()
    assert (after["misses"], after["hits"]) == (before["misses"] + 1, before["hits"])
    assert (again["misses"], again["hits"]) == (after["misses"], after["hits"] + 1)


def test_async_client(live_url: str) -> None:
    async def main() -> None:
        async with AsyncClient(live_url) as pe:
            assert await pe.ready()
            tables = []
            async with anyio.create_task_group() as group:
                for d_model in (4, 5, 6):

                    async def fetch(d: int = d_model) -> None:
                        tables.append((d, await pe.table(20, d)))

                    group.start_soon(fetch)
            for d_model, table in tables:
                assert np.array_equal(table, encoding(0, 20, d_model))
            y = await pe.apply(np.ones((4, 4), np.float32), scale=1.0)
            assert np.array_equal(y, 1 + encoding(0, 4, 4))
            stats = await pe.cache_stats()
            assert stats["tables_total"] >= len(stats["tables"]) >= 1
            with pytest.raises(ProblemError):
                await pe.table(0, 4)

    anyio.run(main)


def test_a_presets_table_and_apply(client: Client) -> None:
    key = preset_key(8, "float32", "fairseq", "library", {"padding_idx": 0}, None)
    table = client.table(10, 8, preset="fairseq", padding_idx=0)
    assert np.array_equal(table, registry.rows(key, 0, 10))
    assert np.all(table[0] == 0)
    exact = client.table(10, 8, preset="fairseq", rounding="exact", padding_idx=0)
    assert not np.array_equal(table, exact)
    x = np.zeros((3, 8), np.float32)
    assert np.array_equal(client.apply(x, preset="fairseq", padding_idx=0), table[1:4])
    with pytest.raises(ProblemError) as error:
        client.apply(x, preset="whisper", padding_idx=0)
    assert error.value.status == 422

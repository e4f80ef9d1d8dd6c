"""The Python client against a real server: sync and async, tables, applies, problems."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import numpy as np
import pytest

from service import core
from service.client import AsyncClient, Client, ProblemError


@pytest.fixture
def client(live_url: str) -> Iterator[Client]:
    with Client(live_url) as pe:
        yield pe


def test_table(client: Client) -> None:
    table = client.table(100, 16, base=100.0, dtype="float64", layout="split")
    assert table.flags.writeable
    assert np.array_equal(table, core.encoding(0, 100, 16, 100.0, "split", "float64"))


def test_table_block(client: Client) -> None:
    block = client.table(100, 16, start=10, stop=20, dim_start=4, dim_stop=8)
    assert np.array_equal(block, core.encoding(0, 100, 16)[10:20, 4:8])


def test_apply(client: Client) -> None:
    x = np.random.default_rng(0).standard_normal((2, 8, 6)).astype(np.float32)
    y = client.apply(x, offset=3, scale=0.5)
    assert np.array_equal(y, core.apply(x, core.encoding(0, 11, 6), 0.5, 3))


def test_apply_with_position_ids(client: Client) -> None:
    x = np.zeros((2, 3, 4), np.float64)
    ids = np.array([[0, 1, 2], [7, 7, 9]])
    y = client.apply(x, position_ids=ids, max_len=10)
    assert np.array_equal(y, core.encoding(0, 10, 4, dtype="float64")[ids])


def test_errors_carry_the_problem(client: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        client.table(10**7, 10**5)
    assert caught.value.status == 422
    assert caught.value.problem["setting"] == "PE_MAX_ELEMENTS"
    assert caught.value.type.endswith("limit-exceeded")
    with pytest.raises(ProblemError) as caught:
        client.apply(np.zeros((3, 4), np.int32))
    assert caught.value.status == 422
    assert "int32" in caught.value.detail


def test_cache_stats_and_readiness(client: Client) -> None:
    client.table(5, 5)
    assert client.ready()
    assert client.cache_stats()["hits"] + client.cache_stats()["misses"] >= 1


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
                assert np.array_equal(table, core.encoding(0, 20, d_model))
            y = await pe.apply(np.ones((4, 4), np.float32), scale=1.0)
            assert np.array_equal(y, 1 + core.encoding(0, 4, 4))
            assert (await pe.cache_stats())["entries"]
            with pytest.raises(ProblemError):
                await pe.table(0, 4)

    anyio.run(main)

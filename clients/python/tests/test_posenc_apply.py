"""Applies through the client against a real service (sinusoidal and rotary), and the
asynchronous client."""

from __future__ import annotations

import anyio
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import AsyncClient, Client, ProblemError


def test_apply(pe: Client) -> None:
    x = np.random.default_rng(0).standard_normal((2, 8, 6)).astype(np.float32)
    y = pe.apply(x, offset=3, scale=0.5)
    assert y.shape == x.shape
    assert y.dtype == np.float32
    assert np.array_equal(y, x * np.float32(0.5) + pe.table(11, 6)[3:11])


def test_apply_scales_by_the_square_root_of_d_model_by_default(pe: Client) -> None:
    x = np.ones((4, 16), np.float64)
    assert np.array_equal(pe.apply(x), 4.0 + pe.table(4, 16, dtype="float64"))


def test_apply_with_position_ids(pe: Client) -> None:
    x = np.zeros((2, 3, 4), np.float64)
    ids = np.array([[0, 1, 2], [7, 7, 9]])
    y = pe.apply(x, position_ids=ids, max_len=10)
    assert np.array_equal(y, pe.table(10, 4, dtype="float64")[ids])
    with pytest.raises(ProblemError) as caught:
        pe.apply(x, position_ids=ids, max_len=9)  # position 9 is not below max_len
    assert caught.value.status == 422


def test_rotary_apply(pe: Client) -> None:
    q = np.random.default_rng(1).standard_normal((2, 3, 5, 8)).astype(np.float32)
    cos, sin = pe.rotary(105, 8, base=500.0)
    y = pe.rotary_apply(q, offset=100, base=500.0)
    assert y.shape == q.shape
    assert y.dtype == np.float32
    assert np.array_equal(y, expected.rotate_half(q, cos[100:], sin[100:]))
    ids = np.array([4, 0, 4, 1, 2])
    by_ids = pe.rotary_apply(q, position_ids=ids, base=500.0)
    assert np.array_equal(by_ids, expected.rotate_half(q, cos[ids], sin[ids]))
    # interleaved pairs (2i, 2i + 1): the same rotation of the reordered dimensions
    order = np.arange(8).reshape(2, 4).T.ravel()  # 0, 4, 1, 5, 2, 6, 3, 7
    turned = pe.rotary_apply(q[..., order], offset=100, base=500.0, convention="interleaved")
    assert np.array_equal(turned, y[..., order])


def test_async_client(service_url: str) -> None:
    async def main() -> None:
        async with AsyncClient(service_url) as pe:
            assert await pe.ready()
            tables = []
            async with anyio.create_task_group() as group:
                for d_model in (4, 5, 6):

                    async def fetch(d: int = d_model) -> None:
                        tables.append((d, await pe.table(20, d)))

                    group.start_soon(fetch)
            for d_model, table in tables:
                formula = expected.sinusoidal(0, 20, d_model).astype(np.float32)
                assert np.array_equal(table, formula)
            y = await pe.apply(np.ones((4, 4), np.float32), scale=1.0)
            assert np.array_equal(y, 1 + await pe.table(4, 4))
            cos, sin = await pe.rotary(8, 4)
            q = np.ones((8, 4), np.float32)
            assert np.array_equal(await pe.rotary_apply(q), expected.rotate_half(q, cos, sin))
            assert np.array_equal(await pe.encoding("rotary", 8, head_dim=4), np.stack([cos, sin]))
            assert np.array_equal(await pe.alibi_slopes(8), expected.slopes(8).astype(np.float32))
            assert (await pe.alibi_bias(2, 3, form="symmetric")).shape == (2, 3, 3)
            assert any(preset["name"] == "vaswani" for preset in await pe.presets())
            stats = await pe.cache_stats()
            assert stats["tables_total"] >= len(stats["tables"]) >= 1
            with pytest.raises(ProblemError):
                await pe.table(0, 4)

    anyio.run(main)

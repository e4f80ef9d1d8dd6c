"""Multi-axis RoPE through the client against a real service: the table, the same at posted
ids, the rotation of a batch, a diffusers config's, and a refusal naming its parameter."""

from __future__ import annotations

import io

import anyio
import httpx
import numpy as np
import pytest
from posenc_client import AsyncClient, Client, ProblemError

TABLE = "/v1/encodings/rope-nd"


def test_the_table_is_the_service_s(pe: Client, http: httpx.Client) -> None:
    cos, sin = pe.rope_nd((3, 4), preset="flux", text_tokens=2, start=1)
    assert cos.shape == sin.shape == (13, 128)
    answer = http.get(f"{TABLE}?grid=3,4&preset=flux&text_tokens=2&start=1&format=npz")
    assert answer.status_code == 200, answer.text
    want = np.load(io.BytesIO(answer.content))
    assert np.array_equal(cos, want["cos"])
    assert np.array_equal(sin, want["sin"])


def test_ids_of_every_axis_are_the_table_s_rows(pe: Client) -> None:
    cos, _ = pe.rope_nd([2, 3, 4], axes_dim=[4, 6, 6])
    at, _ = pe.rope_nd_positions([[1, 0], [2, 0], [3, 1]], grid=[1, 1, 1], axes_dim="4,6,6")
    assert np.array_equal(at, cos[[23, 1]])


def test_apply_rotates_by_the_tokens_table(pe: Client) -> None:
    batch = np.ones((1, 1, 6, 16), np.float32)
    cos, sin = pe.rope_nd([2, 3], axes_dim=[8, 8])
    got = pe.rope_nd_apply(batch, grid=[2, 3], axes_dim=[8, 8])
    assert np.array_equal(got[0, 0, :, 0::2], cos[:, 0::2] - sin[:, 0::2])


def test_from_a_diffusers_config(pe: Client) -> None:
    config = {"_class_name": "WanTransformer3DModel"}
    got = pe.rope_nd_from_config(config, height=64, width=32, frames=5, stop=8)
    want = pe.rope_nd([2, 4, 2], preset="wan", stop=8)
    assert np.array_equal(got[0], want[0])


def test_a_parameter_the_preset_fixes_is_refused(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.rope_nd([2, 2], preset="flux", theta=500.0)
    assert caught.value.status == 422
    assert "theta" in caught.value.detail


def test_async_client(service_url: str, pe: Client) -> None:
    want = pe.rope_nd([1, 2, 2], preset="hunyuan-video")

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            got = await client.rope_nd([1, 2, 2], preset="hunyuan-video")
            assert np.array_equal(got[0], want[0])
            at = await client.rope_nd_positions(
                [[0.0], [1.0], [1.0]], grid=[1, 1, 1], preset="hunyuan-video"
            )
            assert np.array_equal(at[1], want[1][[3]])

    anyio.run(main)

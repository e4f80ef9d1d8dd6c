"""Sin-cos grid tables through the client against a real service: the 2-D table and its
presets, the 3-D table, a diffusers config's, and a refusal naming its parameter."""

from __future__ import annotations

import io

import anyio
import httpx
import numpy as np
import pytest
from posenc_client import AsyncClient, Client, ProblemError

TABLE = "/v1/encodings/sincos-2d"


def npy(answer: httpx.Response) -> np.ndarray:
    assert answer.status_code == 200, answer.text
    found: np.ndarray = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def test_the_2d_table_is_the_service_s(pe: Client, http: httpx.Client) -> None:
    got = pe.sincos_2d(16, 16, 1152, extra_tokens=1, start=1)
    assert got.shape == (256, 1152)
    want = npy(http.get(f"{TABLE}?height=16&width=16&dim=1152&extra_tokens=1&start=1&format=npy"))
    assert np.array_equal(got, want)


def test_presets_and_their_parameters(pe: Client) -> None:
    crop = pe.sincos_2d(4, 5, 16, preset="sd3", pos_embed_max_size=8)
    full = pe.sincos_2d(8, 8, 16, preset="sd3", pos_embed_max_size=8)
    assert np.array_equal(crop.reshape(4, 5, 16), full.reshape(8, 8, 16)[2:6, 1:6])
    timm = pe.sincos_2d(3, 4, 16, preset="timm", interleave_sin_cos=True)
    assert timm.shape == (12, 16)


def test_the_3d_table_and_from_config(pe: Client) -> None:
    table = pe.sincos_3d(13, 30, 45, 1920, preset="cogvideox", start=226, stop=300)
    config = {"_class_name": "CogVideoXTransformer3DModel"}
    got = pe.sincos_3d_from_config(config, frames=49, height=480, width=720, start=226, stop=300)
    assert np.array_equal(got, table)


def test_a_parameter_the_preset_does_not_take_is_refused(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.sincos_2d(4, 4, 16, preset="timm", extra_tokens=1)
    assert caught.value.status == 422
    assert "extra_tokens" in caught.value.detail


def test_async_client(service_url: str, pe: Client) -> None:
    config = {"_class_name": "DiTTransformer2DModel"}
    want = pe.sincos_2d(16, 16, 1152, preset="diffusers", base_size=16)

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            assert np.array_equal(await client.sincos_2d_from_config(config), want)
            table = await client.sincos_3d(2, 2, 2, 16)
            assert table.shape == (8, 16)

    anyio.run(main)

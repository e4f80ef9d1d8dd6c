"""Diffusion timestep embeddings through the client against a real service: the table, the
embeddings at posted real timesteps (FLUX's bfloat16 hop), a diffusers config's, and a
refusal naming its parameter."""

from __future__ import annotations

import io

import anyio
import httpx
import numpy as np
import pytest
from posenc_client import AsyncClient, Client, ProblemError

TABLE = "/v1/encodings/timestep"


def npy(answer: httpx.Response) -> np.ndarray:
    assert answer.status_code == 200, answer.text
    found: np.ndarray = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def test_the_table_is_the_service_s(pe: Client, http: httpx.Client) -> None:
    got = pe.timestep(1000, 320, preset="unet", start=10)
    assert got.shape == (990, 320)
    want = npy(http.get(f"{TABLE}?max_len=1000&dim=320&preset=unet&start=10&format=npy"))
    assert np.array_equal(got, want)


def test_diffusers_parameters_by_their_names(pe: Client) -> None:
    got = pe.timestep(4, 7, flip_sin_to_cos=True, downscale_freq_shift=0, scale=2.0)
    assert got.shape == (4, 7)
    assert not got[:, 6].any()  # an odd width: a zero column last
    assert got[0, :3].tolist() == [1.0, 1.0, 1.0]  # t = 0: cos first


def test_flux_at_sigmas_embeds_the_bfloat16_timesteps(pe: Client) -> None:
    """σ 0.75 and 0.9 (timesteps 750 and 900) reach FLUX's embedding as 752 and 900."""
    got = pe.timestep_positions([750, 900], dim=256, preset="flux")
    plain = pe.timestep_positions([752, 900], dim=256, flip_sin_to_cos=True, downscale_freq_shift=0)
    assert np.array_equal(got, plain)
    pipeline = pe.timestep_positions([750.0, 900.0], dim=256, preset="flux-diffusers")
    assert np.array_equal(pipeline, plain)


def test_from_a_diffusers_config(pe: Client) -> None:
    got = pe.timestep_from_config({"_class_name": "FluxTransformer2DModel"}, max_len=1000)
    assert np.array_equal(got, pe.timestep(1000, 256, preset="flux-diffusers"))


def test_a_parameter_the_preset_fixes_is_refused(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.timestep(4, 8, preset="unet", scale=2.0)
    assert caught.value.status == 422
    assert "scale" in caught.value.detail


def test_async_client(service_url: str, pe: Client) -> None:
    want = pe.timestep_positions([0.5, 999.0], dim=16, preset="wan")

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            got = await client.timestep_positions([0.5, 999.0], dim=16, preset="wan")
            assert np.array_equal(got, want)
            table = await client.timestep(2, 16, preset="wan")
            assert table.shape == (2, 16)
            # diffusers' Wan runs Timesteps(freq_dim, True, 0) in float32: unet's, not wan's
            config = {"_class_name": "WanTransformer3DModel", "freq_dim": 16}
            unet = await client.timestep(2, 16, preset="unet")
            assert np.array_equal(await client.timestep_from_config(config, max_len=2), unet)

    anyio.run(main)


def test_the_timestep_presets_with_their_sources(pe: Client) -> None:
    listed = {preset["name"]: preset for preset in pe.presets("timestep")}
    assert listed["flux"]["follows"][0]["repository"] == "black-forest-labs/flux"
    assert pe.presets("no-such-family") == []
    assert any(preset["name"] == "fairseq" for preset in pe.presets())

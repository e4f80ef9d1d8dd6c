"""Vision towers' 2-D RoPE through the client against a real service: the table, the same
at posted patch coordinates (either way round), the rotation of a batch, integer lists as
parameters, and refusals naming their parameter."""

from __future__ import annotations

import io
from typing import Literal

import anyio
import httpx
import numpy as np
import pytest
from posenc_client import AsyncClient, Client, ProblemError

TABLE = "/v1/encodings/vision-rotary"
# the models the tables below are of
Model = Literal["pixtral", "llama4", "qwen2_vl"]


def test_the_table_is_the_service_s(pe: Client, http: httpx.Client) -> None:
    # Qwen2.5-VL-7B's vision tower over a 56 x 56 image: 4 x 4 patches of 14 pixels
    cos, sin = pe.vision_rotary("qwen2_5_vl", (1, 4, 4), window_index=True, start=1)
    assert cos.shape == sin.shape == (15, 80)
    answer = http.get(f"{TABLE}?model=qwen2_5_vl&grid=1,4,4&window_index=true&start=1&format=npz")
    assert answer.status_code == 200, answer.text
    want = np.load(io.BytesIO(answer.content))
    assert np.array_equal(cos, want["cos"])
    assert np.array_equal(sin, want["sin"])


def test_coordinates_either_way_round_are_the_table_s_rows(pe: Client) -> None:
    cos, sin = pe.vision_rotary("pixtral", [4, 4])  # row-major: row h * 4 + w
    rows, columns = [0, 3, 1], [1, 2, 3]
    at = pe.vision_rotary_positions("pixtral", [4, 4], np.array([rows, columns], np.int32))
    assert np.array_equal(at[0], cos[[1, 14, 7]])
    assert np.array_equal(at[1], sin[[1, 14, 7]])
    across = pe.vision_rotary_positions("pixtral", "4,4", list(zip(rows, columns, strict=True)))
    assert np.array_equal(across[0], at[0])


def test_integer_lists_are_parameters(pe: Client) -> None:
    listed = pe.vision_rotary("eva02", [32, 32], ref_feat_shape=[8, 8], stop=40)
    written = pe.vision_rotary("eva02", "32,32", ref_feat_shape="8,8", stop=40)
    default = pe.vision_rotary("eva02", [32, 32], stop=40)  # its 16 x 16
    assert np.array_equal(listed[0], written[0])
    assert not np.array_equal(listed[0], default[0])


@pytest.mark.parametrize(
    ("model", "grid", "turned"),
    [
        pytest.param("pixtral", [2, 3], "half", id="rotate-half"),
        pytest.param("llama4", [2, 2], "pairs", id="interleaved"),
    ],
)
def test_apply_rotates_by_the_tokens_table(
    pe: Client, model: Model, grid: list[int], turned: str
) -> None:
    cos, sin = pe.vision_rotary(model, grid)
    tokens, head_dim = cos.shape
    batch = np.ones((1, 2, tokens, head_dim), np.float32)
    got = pe.vision_rotary_apply(batch, model, grid)
    assert got.shape == batch.shape
    # x cos + rotate(x) sin with x all ones: the first of each pair is cos - sin
    first = slice(0, head_dim // 2) if turned == "half" else slice(0, head_dim, 2)
    assert np.array_equal(got[0, 1, :, first], cos[:, first] - sin[:, first])


@pytest.mark.parametrize(
    ("model", "grid", "window_index", "named"),
    [
        pytest.param("pixtral", [4, 4], True, "window_index", id="not-its"),
        pytest.param("qwen2_vl", [1, 3, 4], None, "grid", id="not-blocks"),
    ],
)
def test_a_table_the_model_cannot_have_is_refused(
    pe: Client, model: Model, grid: list[int], window_index: bool | None, named: str
) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.vision_rotary(model, grid, window_index=window_index)
    assert caught.value.status == 422
    assert caught.value.detail.startswith(named)


def test_async_client(service_url: str, pe: Client) -> None:
    want = pe.vision_rotary("dinov3", [3, 5])

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            got = await client.vision_rotary("dinov3", [3, 5])
            assert np.array_equal(got[0], want[0])
            at = await client.vision_rotary_positions("dinov3", [3, 5], [[2], [4]])
            assert np.array_equal(at[1], want[1][[14]])
            batch = np.ones((1, 1, 15, 64), np.float32)
            turned = await client.vision_rotary_apply(batch, "dinov3", [3, 5])
            assert turned.shape == batch.shape

    anyio.run(main)

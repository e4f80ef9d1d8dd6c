"""Rotary tables at position ids (M-RoPE's too) and M-RoPE's position ids for a layout,
through the client against a real service: rows of ``GET /v1/encodings/rotary``, and the
same answers in another format."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import AsyncClient, Client, ProblemError

# Qwen2-VL: 3 text tokens, an image of 1 x 4 x 4 patches (2 x 2 tokens once merged), 2 more
LAYOUT: list[dict[str, Any]] = [{"text": 3}, {"image": [1, 4, 4]}, {"text": 2}]
# get_rope_index's answer: text 0, 1, 2; the image's grid at 3 (t) and 3 + row, 3 + column;
# the text after it from the largest id + 1
LAYOUT_IDS = [
    [0, 1, 2, 3, 3, 3, 3, 5, 6],
    [0, 1, 2, 3, 3, 4, 4, 5, 6],
    [0, 1, 2, 3, 4, 3, 4, 5, 6],
]
LAYOUT_DELTA = 7 - 9  # the largest id + 1 - L


def get(http: httpx.Client, **params: Any) -> np.ndarray:
    """``GET /v1/encodings/rotary``'s ``(2, rows, rotary_dim)`` answer, as raw bytes."""
    return expected.raw(http, "/v1/encodings/rotary", **params)


def axes(rotary_dim: int, section: list[int], interleaved: bool) -> np.ndarray:
    """The axis (0 t, 1 h, 2 w) whose position each column of an M-RoPE table turns by:
    ``section`` pairs each, in order (Qwen2-VL), or Qwen3-VL's T H W T H W ... T."""
    pairs = np.arange(rotary_dim // 2)
    if interleaved:
        axis = np.zeros_like(pairs)
        for a in (1, 2):
            axis[(pairs % 3 == a) & (pairs < 3 * section[a])] = a
    else:
        axis = np.repeat([0, 1, 2], section)
    return np.concatenate([axis, axis])  # half: columns k and k + r/2 are pair k


def test_rows_at_position_ids(pe: Client, http: httpx.Client) -> None:
    ids = np.array([[7, 0, 3], [3, 3, 1]])
    params: dict[str, Any] = {"max_len": 8, "head_dim": 16, "base": 500.0, "dtype": "float64"}
    cos, sin = pe.rotary_positions(ids, **params)
    assert cos.shape == sin.shape == (2, 3, 16)
    assert cos.dtype == np.float64
    table = get(http, **params)
    assert np.array_equal(cos, table[0][ids])
    assert np.array_equal(sin, table[1][ids])
    # a list, and int32 ids (sent as int64): the same rows; the scaling's parameters too
    flat_cos, _ = pe.rotary_positions([7, 0, 3], **params)
    assert np.array_equal(flat_cos, cos[0])
    scaled: dict[str, Any] = {"max_len": 8, "head_dim": 8, "scaling": "linear", "factor": 2.0}
    scaled_cos, _ = pe.rotary_positions(np.array([5, 1], np.int32), **scaled)
    assert np.array_equal(scaled_cos, get(http, **scaled)[0][[5, 1]])


@pytest.mark.parametrize(
    ("section", "interleaved"),
    [
        pytest.param([2, 3, 3], None, id="qwen2-vl-list"),
        pytest.param("2,3,3", True, id="qwen3-vl-interleaved-text"),
    ],
)
def test_mrope_rows_turn_each_pair_by_its_axis(
    pe: Client, http: httpx.Client, section: list[int] | str, interleaved: bool | None
) -> None:
    ids = np.array(LAYOUT_IDS)
    cos, sin = pe.rotary_positions(
        ids, max_len=16, head_dim=16, mrope_section=section, mrope_interleaved=interleaved
    )
    assert cos.shape == sin.shape == (9, 16)
    table = get(http, max_len=16, head_dim=16)
    axis = axes(16, [2, 3, 3], bool(interleaved))
    columns = np.arange(16)
    at = ids[axis].T  # (L, 16): row l, column c at the position of its axis
    assert np.array_equal(cos, table[0][at, columns])
    assert np.array_equal(sin, table[1][at, columns])
    # a batch (3, B, L): each sequence's rows as alone
    batch_cos, _ = pe.rotary_positions(
        np.stack([ids, ids[:, ::-1]], axis=1),
        max_len=16,
        head_dim=16,
        mrope_section=section,
        mrope_interleaved=interleaved,
    )
    assert batch_cos.shape == (2, 9, 16)
    assert np.array_equal(batch_cos[0], cos)
    assert np.array_equal(batch_cos[1], cos[::-1])


def test_position_id_problems(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.rotary_positions([0, -1], max_len=8, head_dim=8)
    assert caught.value.status == 422
    assert "non-negative" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.rotary_positions([0.0, 1.5], max_len=8, head_dim=8)  # sent as they are: refused
    assert "must be integers" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.rotary_positions(np.zeros((3, 4), np.int64), max_len=8, head_dim=8, mrope_section="1,1")
    assert "mrope_section" in caught.value.detail


def test_mrope_positions_of_a_layout(pe: Client, http: httpx.Client) -> None:
    ids, delta = pe.mrope_positions(LAYOUT)
    assert ids.dtype == np.int64
    assert ids.shape == (3, 9)
    assert ids.tolist() == LAYOUT_IDS
    assert delta == LAYOUT_DELTA
    # the JSON answer of the same layout, and arrays (an image_grid_thw) in the segments
    document = http.post("/v1/positions/mrope?format=json", json={"segments": LAYOUT}).json()
    assert document["position_ids"] == LAYOUT_IDS
    assert document["rope_delta"] == delta
    again, _ = pe.mrope_positions([{"text": 3}, {"image": np.array([1, 4, 4])}, {"text": 2}])
    assert np.array_equal(again, ids)


@pytest.mark.parametrize(
    ("segments", "settings"),
    [
        pytest.param(
            [{"text": 2}, {"video": [4, 4, 4], "seconds_per_grid": 2.0}, {"text": 1}],
            {"model": "qwen2_5_vl", "tokens_per_second": 2},
            id="qwen2.5-vl-video",
        ),
        pytest.param(
            [{"text": 2}, {"video": [2, 8, 4], "frame_text": 3}, {"text": 1}],
            {"model": "qwen3_vl", "spatial_merge_size": 4},
            id="qwen3-vl-video",
        ),
        pytest.param(
            [{"text": 1}, {"video": [2, 4, 4], "seconds_per_grid": 0.5}],
            {"config": {"model_type": "qwen2_5_vl", "vision_config": {"tokens_per_second": 4}}},
            id="from-a-config",
        ),
    ],
)
def test_mrope_positions_are_the_json_answers(
    pe: Client, http: httpx.Client, segments: list[dict[str, Any]], settings: dict[str, Any]
) -> None:
    ids, delta = pe.mrope_positions(segments, **settings)
    document = http.post(
        "/v1/positions/mrope", params={"format": "json"}, json={"segments": segments, **settings}
    ).json()
    assert ids.tolist() == document["position_ids"]
    assert delta == document["rope_delta"]
    assert ids.shape == (3, document["length"])


def test_mrope_positions_with_a_config_path_and_problems(pe: Client, tmp_path: Any) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "qwen2_vl", "vision_config": {"spatial_merge_size": 2}}')
    for config in (path, str(path), path.read_bytes()):
        ids, delta = pe.mrope_positions(LAYOUT, config=config)
        assert (ids.tolist(), delta) == (LAYOUT_IDS, LAYOUT_DELTA)
    with pytest.raises(ProblemError) as caught:
        pe.mrope_positions([{"text": 1}, {"image": [1, 3, 4]}])  # 3 is not a multiple of 2
    assert caught.value.status == 422
    assert "spatial_merge_size" in caught.value.detail
    with pytest.raises(ValueError, match="JSON compliant"):
        pe.mrope_positions(LAYOUT, config={"model_type": "qwen2_vl", "x": float("nan")})


def test_async_client(service_url: str, pe: Client) -> None:
    want_ids, want_delta = pe.mrope_positions(LAYOUT)
    want_cos, want_sin = pe.rotary_positions(
        want_ids, max_len=16, head_dim=16, mrope_section="2,3,3"
    )

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            ids, delta = await client.mrope_positions(LAYOUT)
            assert np.array_equal(ids, want_ids)
            assert delta == want_delta
            cos, sin = await client.rotary_positions(
                ids, max_len=16, head_dim=16, mrope_section=[2, 3, 3]
            )
            assert np.array_equal(cos, want_cos)
            assert np.array_equal(sin, want_sin)

    anyio.run(main)

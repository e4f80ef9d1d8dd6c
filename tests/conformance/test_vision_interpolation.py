"""Conformance: Qwen3-VL's bilinear indices and weights (``GET
/v1/positions/vision-interpolation``, :mod:`service.encodings.vision_interpolation`) against
transformers 5.23.0's own ``vision_utils.get_vision_interpolation_indices_and_weights(grid_thw,
num_grid_per_side, mode="bilinear", align_corners=True, spatial_merge_size)``: grids of one
and several frames, merge sizes 1 and 2 (and 4), tables of 48 and 32 a side (and others),
seeded random grids; indices equal integer for integer and weights bit for bit, from the
numpy core and from the answer's ``.npz``. Also: what ``Qwen3VLVisionModel.forward``
(``models/qwen3_vl/modeling_qwen3_vl.py``) asks of the function, read from a tiny model built
from its config (no weights); several images in one ``grid_thw`` are each image's rows one
after the other; the deprecated ``get_vision_bilinear_indices_and_weights`` answers their
transpose ``(4, N)``. A summary is written to
``artifacts/conformance-vision-interpolation.json``. Needs the conformance extra."""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator
from typing import Any, Final

import httpx
import numpy as np
import pytest

from service.encodings.vision_interpolation import Grid, indices_and_weights
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

torch: Any = importlib.import_module("torch")
vision_utils: Any = importlib.import_module("transformers.vision_utils")

PATH: Final = "/v1/positions/vision-interpolation"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-vision-interpolation.json"
Case = tuple[Grid, int, int]
CASES: Final[list[Case]] = [
    ((1, 4, 4), 48, 2),  # the worked example
    ((1, 32, 48), 48, 2),  # a 512 × 768 picture in 16-pixel patches
    ((1, 48, 48), 48, 2),  # the table's own size: every weight 1 or 0
    ((1, 96, 62), 48, 2),
    ((1, 194, 98), 48, 2),  # both axes past the table's side
    ((4, 16, 20), 48, 2),  # a video of 4 temporal patches
    ((3, 7, 5), 48, 1),
    ((1, 97, 1), 48, 1),  # at index 1, 1 - (1 - frac) is not frac
    ((1, 1, 1), 48, 1),
    ((2, 36, 24), 32, 2),
    ((1, 33, 65), 32, 1),
    ((1, 64, 64), 32, 2),
    ((2, 16, 16), 32, 4),
    ((1, 10, 10), 1, 2),
    ((1, 30, 18), 100, 3),
]


def random_cases(count: int) -> list[Case]:
    rng = np.random.default_rng(37)
    cases: list[Case] = []
    for _ in range(count):
        merge = int(rng.choice([1, 2, 2, 2, 3]))
        side = int(rng.choice([48, 48, 32, 27, 64]))
        frames = int(rng.integers(1, 4))
        height, width = (merge * int(rng.integers(1, 160 // merge)) for _ in range(2))
        cases.append(((frames, height, width), side, merge))
    return cases


ALL: Final = CASES + random_cases(40)


def theirs(grids: list[Grid], side: int, merge: int) -> tuple[np.ndarray, np.ndarray]:
    indices, weights = vision_utils.get_vision_interpolation_indices_and_weights(
        torch.tensor(grids), side, mode="bilinear", align_corners=True, spatial_merge_size=merge
    )
    assert (indices.dtype, weights.dtype) == (torch.int64, torch.float32)
    return indices.numpy(), weights.numpy()


def bitwise(ours: np.ndarray, expected: np.ndarray) -> bool:
    return ours.dtype == expected.dtype and np.array_equal(
        ours.view(np.uint32) if ours.dtype == np.float32 else ours,
        expected.view(np.uint32) if expected.dtype == np.float32 else expected,
    )


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {"cases": 0, "patches": 0, "bitwise": 0, "largest_difference": 0.0}
    yield found
    if found["cases"]:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize(
    ("grid", "side", "merge"), ALL, ids=[f"{g[0]}x{g[1]}x{g[2]}-side{s}-m{m}" for g, s, m in ALL]
)
def test_the_core_and_the_answer_are_transformers(
    service: httpx.Client, summary: dict[str, Any], grid: Grid, side: int, merge: int
) -> None:
    expected_indices, expected_weights = theirs([grid], side, merge)
    indices, weights = indices_and_weights(grid, side, merge)
    query = f"grid={','.join(map(str, grid))}&num_grid_per_side={side}"
    answer = service.get(f"{PATH}?{query}&spatial_merge_size={merge}&format=npz")
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        served = archive["indices"], archive["weights"]
    difference = float(np.max(np.abs(weights - expected_weights), initial=0.0))
    summary["cases"] += 1
    summary["patches"] += len(expected_indices)
    summary["largest_difference"] = max(summary["largest_difference"], difference)
    equal = (
        bitwise(indices, expected_indices)
        and bitwise(weights, expected_weights)
        and bitwise(served[0], expected_indices)
        and bitwise(served[1], expected_weights)
    )
    summary["bitwise"] += equal
    np.testing.assert_array_equal(indices, expected_indices)
    assert bitwise(weights, expected_weights), difference
    assert bitwise(served[0], expected_indices)
    assert bitwise(served[1], expected_weights)


def test_several_images_are_each_ones_rows_in_turn() -> None:
    grids: list[Grid] = [(1, 4, 6), (2, 8, 4), (1, 30, 2)]
    expected_indices, expected_weights = theirs(grids, 48, 2)
    parts = [indices_and_weights(grid, 48, 2) for grid in grids]
    np.testing.assert_array_equal(np.concatenate([part[0] for part in parts]), expected_indices)
    assert bitwise(np.concatenate([part[1] for part in parts]), expected_weights)


def test_the_deprecated_wrapper_is_the_transpose() -> None:
    grid: Grid = (2, 12, 8)
    indices, weights = vision_utils.get_vision_bilinear_indices_and_weights(
        torch.tensor([grid]), 48, spatial_merge_size=2
    )
    ours = indices_and_weights(grid, 48, 2)
    assert tuple(indices.shape) == (4, 192)
    np.testing.assert_array_equal(indices.numpy(), ours[0].T)
    assert bitwise(np.ascontiguousarray(weights.numpy()), np.ascontiguousarray(ours[1].T))


def test_what_qwen3_vls_vision_tower_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny ``Qwen3VLVisionModel`` (its config's 2304 position embeddings, merge 2) run on
    a grid: the arguments its forward gives the function, and what it gets back, are the
    service's defaults and answer."""
    modeling_qwen3_vl = importlib.import_module("transformers.models.qwen3_vl.modeling_qwen3_vl")
    config = modeling_qwen3_vl.Qwen3VLVisionConfig(
        depth=1,
        hidden_size=32,
        intermediate_size=32,
        num_heads=2,
        out_hidden_size=32,
        num_position_embeddings=2304,
        patch_size=16,
        temporal_patch_size=2,
        spatial_merge_size=2,
        deepstack_visual_indexes=[],
    )
    model = modeling_qwen3_vl.Qwen3VLVisionModel._from_config(config).eval()
    original = modeling_qwen3_vl.get_vision_interpolation_indices_and_weights
    calls: list[tuple[dict[str, Any], Any]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        answer = original(*args, **kwargs)
        calls.append(({k: v for k, v in kwargs.items() if k != "kwargs"}, answer))
        return answer

    monkeypatch.setattr(modeling_qwen3_vl, "get_vision_interpolation_indices_and_weights", spy)
    grid: Grid = (2, 4, 6)
    patches = torch.zeros(48, 3 * 2 * 16 * 16)
    with torch.no_grad():
        model(patches, grid_thw=torch.tensor([grid]))
    [(asked, (indices, weights))] = calls
    assert asked == {
        "num_grid_per_side": 48,
        "mode": "bilinear",
        "align_corners": True,
        "spatial_merge_size": 2,
    }
    ours = indices_and_weights(grid, 48, 2)
    np.testing.assert_array_equal(indices.numpy(), ours[0])
    assert bitwise(weights.numpy(), ours[1])

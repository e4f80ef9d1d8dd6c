"""The timestep family's audit: its reference is the formula at the real timesteps (never
cast), so each path shows the hop a model's timesteps take (bfloat16 rounds integers past
256, float16 past 2048 and holds none past 65504; FLUX's pipeline rounds three times),
the arithmetic (diffusers' float32 against Wan's float64) and the stored table's dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.audit import paths, report
from service.encodings import registry, timestep
from service.encodings.timestep import TimestepKey


def path(key: TimestepKey, name: str) -> Any:
    return {found.name: found for found in paths.paths_of(key)}[name]


def first_over(key: TimestepKey, name: str, positions: Any, threshold: float) -> int:
    errors = np.abs(path(key, name).values(key, positions) - paths.exact(key, positions))
    over = np.flatnonzero(np.nan_to_num(errors, nan=2.0).max(axis=1) > threshold)
    return int(positions[over[0]])


UNET: Any = timestep.preset_key(320, "unet", {}, "library", "float32")


def test_the_paths_in_order_the_library_s_described_as_its_own() -> None:
    assert report.names(UNET) == [
        "library",
        "bf16-table",
        "fp16-table",
        "float32-timesteps",
        "bf16-timesteps",
        "fp16-timesteps",
        "float32-angles",
        "float64-angles",
        "device",
    ]
    assert "diffusers' float32" in path(UNET, "library").description


@pytest.mark.parametrize(
    ("name", "first"),
    [
        pytest.param("bf16-timesteps", 257, id="bf16"),  # 257 is 256 in bfloat16
        pytest.param("fp16-timesteps", 2049, id="fp16"),  # 2049 is 2048 in float16
    ],
)
def test_a_narrow_timestep_is_a_wrong_timestep_from_its_first_rounding(
    name: str, first: int
) -> None:
    positions = np.arange(4096, dtype=np.int64)
    assert first_over(UNET, name, positions, 1e-3) == first
    # until then it is the library's table
    below = positions[:first]
    np.testing.assert_array_equal(
        path(UNET, name).values(UNET, below), path(UNET, "library").values(UNET, below)
    )


def test_float16_timesteps_past_its_range_count_as_wrong() -> None:
    positions = np.array([65504, 65520, 70000], dtype=np.int64)
    got = path(UNET, "fp16-timesteps").values(UNET, positions)
    assert np.isfinite(got[0]).all()
    assert np.isnan(got[1:]).all()


def test_the_reference_is_the_uncast_timestep() -> None:
    """FLUX's diffusers pipeline receives t rounded three times in bfloat16: its library
    table departs from the exact one where that rounding moves t, and not before; with
    float32 timesteps it never does below 1000."""
    key = timestep.preset_key(256, "flux-diffusers", {}, "library", "float32")
    positions = np.arange(1000, dtype=np.int64)
    moved = timestep.hop(key, positions) != positions
    assert first_over(key, "library", positions, 1e-3) == int(np.flatnonzero(moved)[0])
    errors = path(key, "float32-timesteps").values(key, positions) - paths.exact(key, positions)
    assert np.abs(errors).max() < 1e-4
    # row 1 is t = 1 (not 1000): [cos | sin] of 10000^(-i/128)
    angles = 1e4 ** -(np.arange(128) / 128)
    want = np.concatenate([np.cos(angles), np.sin(angles)])
    np.testing.assert_allclose(paths.exact(key, positions[1:2])[0], want, rtol=0, atol=2e-16)


def test_wan_s_float64_arithmetic_is_within_a_rounding_of_exact() -> None:
    key = timestep.preset_key(256, "wan", {}, "library", "float32")
    positions = np.arange(0, 1000, 7, dtype=np.int64)
    exact = paths.exact(key, positions)
    wan = path(key, "library").values(key, positions)
    assert np.abs(wan - exact).max() <= 2.0**-24  # one float32 rounding of an entry below 1
    diffusers = path(key, "float32-angles").values(key, positions)
    assert np.abs(diffusers - exact).max() > 1e-6  # float32 angles at t near 1000


def test_the_library_path_is_the_table() -> None:
    positions = np.arange(0, 1000, 13, dtype=np.int64)
    np.testing.assert_array_equal(
        path(UNET, "library").values(UNET, positions),
        timestep.entries(UNET, registry.take(UNET, positions)),
    )

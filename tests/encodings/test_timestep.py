"""The timestep family: the formula's properties against 200-bit arithmetic, each preset's
parameters, the timesteps as models receive them (FLUX's bfloat16 hop), and refusals."""

from __future__ import annotations

import math
from typing import Any, get_args

import mpmath
import numpy as np
import pytest

from service.encodings import registry, timestep
from service.encodings.timestep import PRESETS, TimestepKey, at, preset_key, received
from service.errors import InvalidParameter


def oracle(key: TimestepKey, t: float) -> list[float]:
    """A row from its definition at the received timestep ``t``, to 200 bits."""
    with mpmath.workprec(200):
        half = key.dim // 2
        sines, cosines = [], []
        for i in range(half):
            exponent = -mpmath.log(key.max_period) * i / (half - key.downscale_freq_shift)
            angle = mpmath.mpf(key.scale) * (mpmath.mpf(t) * mpmath.exp(exponent))
            sines.append(float(mpmath.sin(angle)))
            cosines.append(float(mpmath.cos(angle)))
    row = cosines + sines if key.flip_sin_to_cos else sines + cosines
    return row + [0.0] * (key.dim % 2)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(TimestepKey(8, rounding="exact", dtype="float64"), id="diffusers"),
        pytest.param(TimestepKey(9, True, 0.0, rounding="exact", dtype="float64"), id="flip-odd"),
        pytest.param(
            TimestepKey(6, True, 0.0, scale=1000.0, rounding="exact", dtype="float64"),
            id="scale",
        ),
        pytest.param(
            TimestepKey(10, downscale_freq_shift=0.5, max_period=50.0, rounding="exact"),
            id="fractional-shift",
        ),
    ],
)
def test_exact_rows_are_the_formula_rounded_once(key: TimestepKey) -> None:
    timesteps = np.array([0.0, 1.0, 0.5, 123.25, 999.0, 65504.0])
    rows = at(key, timesteps)
    for t, row in zip(received(key, timesteps), rows, strict=True):
        expected = np.array(oracle(key, float(t)), dtype=key.dtype)
        if key.dtype == "float32":
            np.testing.assert_array_equal(row, expected)  # within half an ulp: equal
        else:
            np.testing.assert_allclose(row, expected, rtol=0, atol=2.0**-51)


def test_library_is_within_an_ulp_of_exact() -> None:
    """float32 arithmetic step by step: the angles' float32 roundings apart, and equal
    where the frequency is 1 (the angle is the timestep, exact)."""
    library = registry.rows(TimestepKey(320, True, 0.0), 0, 1000)
    exact = registry.rows(TimestepKey(320, True, 0.0, rounding="exact", dtype="float64"), 0, 1000)
    assert np.abs(library - exact).max() < 1e-4
    np.testing.assert_array_equal(library[:, [0, 160]], exact.astype(np.float32)[:, [0, 160]])


def test_layout_flip_and_odd_widths() -> None:
    plain = registry.rows(TimestepKey(7), 0, 5)
    flipped = registry.rows(TimestepKey(7, flip_sin_to_cos=True), 0, 5)
    np.testing.assert_array_equal(plain[:, :3], flipped[:, 3:6])
    np.testing.assert_array_equal(plain[:, 3:6], flipped[:, :3])
    assert not plain[:, 6].any()
    assert not flipped[:, 6].any()
    np.testing.assert_array_equal(plain[0, :6], [0, 0, 0, 1, 1, 1])  # t = 0: sin 0, cos 0


def test_width_one_is_a_zero_column() -> None:
    np.testing.assert_array_equal(registry.rows(TimestepKey(1), 0, 3), np.zeros((3, 1)))


def test_rows_in_pieces_and_at_positions_are_the_same_bits() -> None:
    key = TimestepKey(64, True, 0.0)
    whole = registry.rows(key, 0, 300)
    np.testing.assert_array_equal(registry.rows(key, 100, 300), whole[100:])
    scattered = np.array([299, 0, 7, 7, 150])
    np.testing.assert_array_equal(registry.take(key, scattered), whole[scattered])
    np.testing.assert_array_equal(at(key, scattered.astype(np.float64)), whole[scattered])


def test_scale_is_applied_after_the_product() -> None:
    """Qwen-Image's and AuraFlow's ``scale * (t * f)``: not ``(scale * t) * f`` in float32."""
    given = {"flip_sin_to_cos": True, "downscale_freq_shift": 0.0, "scale": 1000.0}
    key = preset_key(256, "diffusers", given, "library", "float32")
    t = np.linspace(0, 1, 257)[1:]
    frequencies = np.exp(
        (np.float32(-math.log(10000)) * np.arange(128, dtype=np.float32) / np.float32(128)).astype(
            np.float64
        )
    ).astype(np.float32)
    after = np.float32(1000) * (t.astype(np.float32)[:, None] * frequencies)
    np.testing.assert_array_equal(
        at(key, t)[:, 128:], np.sin(after.astype(np.float64)).astype(np.float32)
    )


@pytest.mark.parametrize(
    ("sigma", "received_value"),
    [
        pytest.param(0.75, 752.0, id="0.75"),
        pytest.param(0.9, 900.0, id="0.9"),
        pytest.param(0.6123, 612.0, id="0.6123"),
        pytest.param(0.3333, 334.0, id="0.3333"),
    ],
)
def test_flux_hop_in_bfloat16(sigma: float, received_value: float) -> None:
    """FLUX's sampler: σ = t / 1000, bf16(σ), then bf16(1000·σ); diffusers' pipeline from
    σ·1000: three roundings, the same here."""
    flux = preset_key(256, "flux", {}, "library", "float32")
    pipeline = preset_key(256, "flux-diffusers", {}, "library", "float32")
    assert received(flux, np.array([sigma * 1000]))[0] == received_value
    plain = TimestepKey(256, True, 0.0)
    np.testing.assert_array_equal(
        at(flux, np.array([sigma * 1000])), at(plain, np.array([received_value]))
    )
    assert received(pipeline, np.array([sigma * 1000]))[0] == received_value


def test_flux_paths_part_for_some_sigmas() -> None:
    """The reference sampler rounds twice, diffusers' pipeline three times: they disagree."""
    flux = preset_key(256, "flux", {}, "library", "float32")
    pipeline = preset_key(256, "flux-diffusers", {}, "library", "float32")
    sigmas = np.arange(1, 2001) / 2000
    apart = received(flux, sigmas * 1000) != received(pipeline, sigmas * 1000)
    assert 0.05 < apart.mean() < 0.5
    assert np.abs(received(flux, sigmas * 1000) - received(pipeline, sigmas * 1000)).max() <= 8


def test_qwen_image_and_auraflow_divide_otherwise() -> None:
    """Qwen-Image: σ = bf16(bf16(t) / 1000); AuraFlow: σ = bf16(f32(t) / 1000). (Qwen-Image's
    own get_timestep_embedding, which casts its frequencies to the timesteps' dtype, is
    never called: its Timesteps module is diffusers'.)"""
    t = np.array([999.0, 257.0, 1.0])
    qwen = preset_key(256, "qwen-image", {}, "library", "float32")
    aura = preset_key(256, "auraflow", {}, "library", "float32")
    bf16 = TimestepKey(4, timestep_dtype="bfloat16")
    narrow = received(bf16, received(bf16, t) / np.float32(1000))
    np.testing.assert_array_equal(received(qwen, t), narrow)
    np.testing.assert_array_equal(received(aura, t), received(bf16, t.astype(np.float32) / 1000))
    assert (received(qwen, t) != received(aura, t)).any()  # 257: 256 in bfloat16 first
    frequencies = timestep.library_frequencies(qwen)
    angles = np.float32(1000) * (received(qwen, t)[:, None] * frequencies[None, :])
    np.testing.assert_array_equal(
        at(qwen, t)[:, 128:], np.sin(angles.astype(np.float64)).astype(np.float32)
    )


def test_timestep_dtypes_round_as_torch_casts() -> None:
    key = TimestepKey(4, timestep_dtype="float16")
    assert received(key, np.array([2049.0, 0.1]))[0] == 2048.0
    assert received(key, np.array([0.1]))[0] == np.float32(np.float16(0.1))
    bf16 = TimestepKey(4, timestep_dtype="bfloat16")
    assert list(received(bf16, np.array([257.0, 999.0, 1.0 / 3]))) == [256.0, 1000.0, 0.333984375]


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("diffusers", {"flip_sin_to_cos": False, "downscale_freq_shift": 1.0}),
        ("unet", {"flip_sin_to_cos": True, "downscale_freq_shift": 0.0}),
        ("guided-diffusion", {"flip_sin_to_cos": True, "downscale_freq_shift": 0.0}),
        ("ddpm", {"flip_sin_to_cos": False, "downscale_freq_shift": 1.0}),
        (
            "flux",
            {"flip_sin_to_cos": True, "time_factor": 1000.0, "timestep_dtype": "bfloat16"},
        ),
        (
            "flux-diffusers",
            {"flip_sin_to_cos": True, "time_factor": 1000.0, "timestep_dtype": "bfloat16"},
        ),
        ("wan", {"flip_sin_to_cos": True, "downscale_freq_shift": 0.0}),
        ("qwen-image", {"flip_sin_to_cos": True, "scale": 1000.0}),
    ],
)
def test_each_preset_s_parameters(name: str, settings: dict[str, Any]) -> None:
    key = preset_key(256, name, {}, "library", "float32")
    for parameter, value in settings.items():
        assert getattr(key, parameter) == value
    assert key.max_period == 10000.0
    assert PRESETS[name].sources


def test_the_query_offers_the_table_s_presets() -> None:
    """The query's ``preset`` names are made from :data:`PRESETS`, in its order."""
    from service.schemas.timestep import TimestepQuery

    field = TimestepQuery.model_fields["preset"]
    assert get_args(field.annotation) == tuple(PRESETS)
    assert field.default == "diffusers"


def test_wan_computes_in_float64() -> None:
    key = preset_key(256, "wan", {}, "library", "float64")
    t = np.array([1.0, 500.0, 999.0])
    half = np.arange(128) / 128
    angles = np.outer(t, np.power(10000.0, -half))
    np.testing.assert_array_equal(at(key, t), np.concatenate([np.cos(angles), np.sin(angles)], 1))


@pytest.mark.parametrize(
    ("build", "name"),
    [
        pytest.param(lambda: TimestepKey(0), "dim", id="dim"),
        pytest.param(lambda: TimestepKey(4, max_period=1.0), "max_period", id="max-period-1"),
        pytest.param(lambda: TimestepKey(4, max_period=math.inf), "max_period", id="max-inf"),
        pytest.param(
            lambda: TimestepKey(4, downscale_freq_shift=2.0),
            "downscale_freq_shift",
            id="shift-half",
        ),
        pytest.param(lambda: TimestepKey(2), "downscale_freq_shift", id="diffusers-at-2"),
        pytest.param(
            lambda: TimestepKey(256, downscale_freq_shift=129.0),
            "downscale_freq_shift",
            id="frequencies-overflow",
        ),
        pytest.param(lambda: TimestepKey(4, scale=math.nan), "scale", id="scale-nan"),
        pytest.param(lambda: preset_key(7, "wan", {}, "library", "float32"), "dim", id="wan-odd"),
        pytest.param(
            lambda: preset_key(8, "unet", {"scale": 2.0}, "library", "float32"),
            "scale",
            id="fixed-by-preset",
        ),
        pytest.param(
            lambda: preset_key(8, "sd", {}, "library", "float32"), "preset", id="unknown-preset"
        ),
        pytest.param(
            lambda: at(TimestepKey(4, timestep_dtype="float16"), np.array([7e4])),
            "timestep_dtype",
            id="past-float16",
        ),
        pytest.param(
            lambda: at(TimestepKey(4, time_factor=1e36), np.array([1e3])),
            "time_factor",
            id="factor-overflows",
        ),
        pytest.param(
            lambda: at(TimestepKey(4, downscale_freq_shift=0.0, rounding="exact"), np.array([3e9])),
            "rounding",
            id="exact-too-far",
        ),
    ],
)
def test_bad_parameters_are_named(build: Any, name: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        build()
    assert caught.value.name == name


def test_a_preset_takes_the_timestep_dtype() -> None:
    key = preset_key(16, "unet", {"timestep_dtype": "float16", "scale": None}, "exact", "float32")
    assert key.timestep_dtype == "float16"
    assert key.rounding == "exact"


def test_overflowing_angles_are_refused_not_served() -> None:
    """Huge timesteps times a huge scale overflow float32: the table holds NaN, refused."""
    key = TimestepKey(4, downscale_freq_shift=0.0, scale=1e30)
    with pytest.raises(InvalidParameter) as caught:
        registry.checked(key, at(key, np.array([1e10])))
    assert caught.value.name == "scale"

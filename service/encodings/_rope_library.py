"""transformers' own float32 arithmetic for RoPE (``rounding=library``): the inverse
frequencies each ``_compute_*_rope_parameters`` function of ``modeling_rope_utils.py``
computes, every intermediate rounded where torch rounds it, and the cos and sin that
``LlamaRotaryEmbedding.forward`` makes of them (position as float32, times the frequency
in float32, cos and sin in float32, times the attention factor in float32).

torch's float32 ``pow``, ``cos`` and ``sin`` are within an ulp, not correctly rounded:
here they are the library engine's (:mod:`.kernels`), torch's own with the torch engine,
else the float64 function of the float32 arguments, rounded once. A Python number meets a
float32 tensor as a float32, as in torch.

One function a scaling, ``(base, rotary_dim, resolved parameters)`` to the inverse
frequencies; :data:`.scalings.RULES` names each scaling's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.encodings import kernels
from service.errors import InvalidParameter

F32 = np.float32
Float32Array = NDArray[np.float32]


def _pow(base: float | Float32Array, exponent: Float32Array) -> Float32Array:
    """float32 ``base ** exponent`` (both rounded to float32 first): the exponents are the
    whole vector transformers makes, as torch's bits depend on it (:mod:`.kernels`)."""
    return kernels.pow(base, exponent)


def _reciprocal(x: Float32Array) -> Float32Array:
    """``1.0 / x``: torch's ``reciprocal``, correctly rounded."""
    return np.asarray(F32(1) / x)


def _over(x: Float32Array, number: float) -> Float32Array:
    """``x / number`` for a Python number, in float32."""
    return np.asarray(x / F32(number))


def _exponents(rotary_dim: int) -> Float32Array:
    """``torch.arange(0, dim, 2).float() / dim``."""
    return _over(np.arange(0, rotary_dim, 2).astype(F32), rotary_dim)


def _default(base: float | Float32Array, rotary_dim: int) -> Float32Array:
    """``1.0 / (base ** (arange(0, dim, 2).float() / dim))``."""
    return _reciprocal(_pow(base, _exponents(rotary_dim)))


def _dynamic_base(base: float, rotary_dim: int, values: Mapping[str, Any]) -> float | Float32Array:
    """The base ``_compute_dynamic_ntk_parameters`` uses: in Python floats at the model's
    own length (how the model starts), in float32 tensors past it (the forward pass passes
    the sequence length as a tensor)."""
    factor, mpe, seq_len = values["factor"], values["max_position_embeddings"], values["seq_len"]
    exponent = rotary_dim / (rotary_dim - 2)
    if seq_len <= mpe:
        return float(base * ((factor * mpe / mpe) - (factor - 1)) ** exponent)
    grown = _over(F32(factor) * np.asarray(F32(seq_len)), mpe) - F32(factor - 1)
    # a tensor to the power of a Python number: the exponent stays a double
    return np.asarray(F32(base) * F32(np.float64(grown) ** exponent))


def default(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    """none (transformers' ``default``)."""
    return _default(base, rotary_dim)


def linear(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    return _over(_default(base, rotary_dim), values["factor"])


def proportional(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    """1 / base^(2k / head_dim) for the rotated pairs, then 0s."""
    turning = np.arange(rotary_dim // 2) < values["rotated"]
    return _over(np.where(turning, _default(base, rotary_dim), F32(0)), values["factor"])


def ntk(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    return _default(base * values["factor"] ** (rotary_dim / (rotary_dim - 2)), rotary_dim)


def dynamic(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    return _default(_dynamic_base(base, rotary_dim, values), rotary_dim)


def longrope(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    ext = np.asarray(values["ext_factors"], dtype=F32)
    return _reciprocal(ext * _pow(base, _exponents(rotary_dim)))


def yarn(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    pos_freqs = _pow(base, _exponents(rotary_dim))
    extrapolation = _reciprocal(pos_freqs)
    interpolation = _reciprocal(F32(values["factor"]) * pos_freqs)
    low, high = yarn_range(rotary_dim, base, values)
    if low == high:
        high += 0.001
    ramp = _over(np.arange(rotary_dim // 2, dtype=F32) - F32(low), high - low)
    extra = F32(1) - np.clip(ramp, F32(0), F32(1))
    return np.asarray(interpolation * (F32(1) - extra) + extrapolation * extra)


def llama3(base: float, rotary_dim: int, values: Mapping[str, Any]) -> Float32Array:
    inv = _default(base, rotary_dim)
    factor, original = values["factor"], values["original_max_position_embeddings"]
    low, high = values["low_freq_factor"], values["high_freq_factor"]
    wavelength = _reciprocal(inv) * F32(2 * math.pi)
    scaled = np.where(wavelength > F32(original / low), _over(inv, factor), inv)
    with np.errstate(divide="ignore", invalid="ignore"):  # equal factors: no band to blend
        smooth = _over(_reciprocal(wavelength) * F32(original) - F32(low), high - low)
        smoothed = _over((F32(1) - smooth) * scaled, factor) + smooth * scaled
    medium = ~(wavelength < F32(original / high)) & ~(wavelength > F32(original / low))
    return np.asarray(np.where(medium, smoothed, scaled))


def yarn_range(rotary_dim: int, base: float, params: Mapping[str, Any]) -> tuple[float, float]:
    """The pairs between which yarn's ramp runs (``find_correction_range``, float64): the
    exact arithmetic takes them from here too, as transformers computes them."""

    def dim(rotations: float) -> float:
        wavelengths = params["original_max_position_embeddings"] / (rotations * 2 * math.pi)
        return (rotary_dim * math.log(wavelengths)) / (2 * math.log(base))

    low, high = dim(params["beta_fast"]), dim(params["beta_slow"])
    for name, value in [("beta_fast", low), ("beta_slow", high)]:
        if not math.isfinite(value):
            raise InvalidParameter(name, "gives a correction range that is not finite")
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rotary_dim - 1)


def cos_sin(
    positions: NDArray[np.int64] | Float32Array, inverse: Float32Array, attention: float
) -> tuple[Float32Array, Float32Array]:
    """``cos`` and ``sin`` of ``position.float() * inv_freq`` in float32, times the
    attention factor in float32 (when it is not 1)."""
    angles = positions.astype(F32)[:, None] * inverse[None, :]
    cos, sin = kernels.cos(angles), kernels.sin(angles)
    if attention != 1:
        cos *= F32(attention)
        sin *= F32(attention)
    return cos, sin

"""The libraries' own arithmetic (``rounding=library``), one function per preset: the angles
a library computes for integer positions, with every intermediate rounded where the library
rounds it (numpy float32 operations are IEEE single precision, as torch's, TensorFlow's and
mlx's are). The libraries' exp, pow, sin and cos are not correctly rounded (torch: about 1 %
of float32 results one ulp off; mlx: several ulps): here each is the float64 function of the
float32 argument, rounded once, which is within the library's own error of what it computes;
where the library is torch (the presets marked ``torch``) they are the library engine's
(:mod:`.kernels`): torch's own with the torch engine, bit for bit.

Each function takes the positions (int64, the start index already added) and returns the
angles, one column per sine column, as float32 (or float64 for the libraries that compute in
float64 and round once at the end); its source is cited in ``presets.PRESETS``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.encodings import kernels

F32 = np.float32
Angles = NDArray[np.floating]
Params = Mapping[str, Any]


def exp32(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """float32 exp, correctly rounded."""
    return np.exp(x.astype(np.float64)).astype(F32)


def f32(value: float) -> np.float32:
    """A Python float as float32, as the libraries take it: past float32's range it is
    infinite there too (a base of 1e300 gives frequencies of 0, which this reproduces)."""
    with np.errstate(over="ignore"):
        return F32(value)


def pow32(base: np.float32, exponent: NDArray[np.float32]) -> NDArray[np.float32]:
    """float32 ``base ** exponent``, correctly rounded."""
    with np.errstate(over="ignore"):
        return np.power(np.float64(base), exponent.astype(np.float64)).astype(F32)


def sincos(angles: Angles) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """float32 sin and cos of the angles (float32 or float64), each rounded once."""
    wide = angles.astype(np.float64, copy=False)
    return np.sin(wide).astype(F32), np.cos(wide).astype(F32)


def _times(positions: NDArray[np.int64], frequencies: NDArray[np.float32]) -> Angles:
    """float32 ``position * frequency``: the position converted to float32 first."""
    out: NDArray[np.float32] = positions.astype(F32)[:, None] * frequencies[None, :]
    return out


def pytorch_tutorial(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``div_term = exp(arange(0, d, 2).float() * (-math.log(base) / d))``; ``position *
    div_term`` (int64 position times float32)."""
    scalar = F32(-math.log(params["base"]) / d)
    div_term = kernels.exp(np.arange(0, d, 2).astype(F32) * scalar)
    return _times(positions, div_term)


def tf_tutorial(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """numpy float64 throughout (``depths = arange(d/2) / (d/2)``, ``rates = 1 /
    base**depths``, ``angles = position * rates``), cast to float32 at the end."""
    depth = d / 2
    depths = np.arange(depth) / depth
    rates = 1 / (params["base"] ** depths)
    out: NDArray[np.float64] = positions[:, None] * rates[None, :]
    return out


def tensor2tensor(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``inc = log(max_ts / min_ts) / maximum(float(n) - 1, 1)`` (a float32 division), ``inv =
    min_ts * exp(float(range(n)) * -inc)``, ``float(range(L) + start_index) * inv``."""
    n = d // 2
    low, high = float(params["min_timescale"]), float(params["max_timescale"])
    increment = F32(math.log(high / low)) / np.maximum(F32(n) - F32(1), F32(1))
    inverse = F32(low) * exp32(np.arange(n).astype(F32) * -increment)
    return _times(positions, inverse)


def fairseq(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``emb = math.log(base) / (n - 1)``; ``exp(arange(n).float() * -emb)``; ``arange(N).
    float()[:, None] * emb`` (as fairseq, Hugging Face's M2M100 family, Whisper and
    MusicGen compute it)."""
    n = d // 2
    scalar = F32(-(math.log(params["base"]) / (n - 1)))
    frequencies = kernels.exp(np.arange(n).astype(F32) * scalar)
    return _times(positions, frequencies)


def marian(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """numpy float64: ``pos / np.power(base, 2 * (j // 2) / dim)`` for the sine columns
    ``j = 0, 2, ...`` (their pair ``k = j // 2``), sin and cos in float64, then float32."""
    k = np.arange((d + 1) // 2)
    denominators = np.array([np.power(params["base"], 2 * i / d) for i in k], dtype=np.float64)
    out: NDArray[np.float64] = positions.astype(np.float64)[:, None] / denominators[None, :]
    return out


def keras(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``timescales = power(float(1 / max_wavelength), float(2 * (j // 2)) / float(d))``
    in float32; ``float(arange(L) + start_index) * timescales``."""
    k = np.arange((d + 1) // 2)
    exponents = (2 * k).astype(F32) / F32(d)
    timescales = pow32(F32(1 / params["max_wavelength"]), exponents)
    return _times(positions, timescales)


def positional_encodings(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``channels = 2 * ceil(d / 2)``; ``inv_freq = 1.0 / (base ** (arange(0, channels,
    2).float() / channels))`` in float32; ``arange(x).float() * inv_freq``."""
    channels = 2 * math.ceil(d / 2)
    exponents = np.arange(0, channels, 2).astype(F32) / F32(channels)
    inverse = F32(1.0) / kernels.pow(f32(params["base"]), exponents)
    return _times(positions, inverse)


def mlx(positions: NDArray[np.int64], d: int, params: Params) -> Angles:
    """``one_zero = 1 - arange(n) / (n - 1)`` (``[1]`` when n is 1); ``sigmas = exp(one_zero
    * (log max_freq - log min_freq) + log min_freq)``, times ``2 pi`` with ``full_turns``;
    ``x[..., None] * sigmas``, all float32."""
    n = d // 2
    steps = np.arange(n).astype(F32) / F32(n - 1) if n > 1 else np.zeros(1, F32)
    one_zero = F32(1) - steps
    low, high = math.log(params["min_freq"]), math.log(params["max_freq"])
    sigmas = exp32(one_zero * F32(high - low) + F32(low))
    if params["full_turns"]:
        sigmas = sigmas * F32(2 * math.pi)
    return _times(positions, sigmas)

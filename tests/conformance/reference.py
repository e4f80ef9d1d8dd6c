"""What the conformance tests compare the service's preset tables with, other than the
installed libraries themselves:

- independent implementations of the library code that cannot be installed here, written
  from its source's arithmetic: fairseq's ``get_embedding`` and ``make_positions`` (no
  fairseq wheel for Python 3.11) and the PyTorch tutorial's ``PositionalEncoding`` (a
  tutorial, not a package), in torch; tensor2tensor's ``get_timing_signal_1d`` (TF1-era, does
  not import) on TensorFlow's ops or a numpy float32 stand-in for them; the TensorFlow
  tutorial's ``positional_encoding`` (numpy);
- :func:`exact`: each preset's formula (``GET /v1/presets``) evaluated in mpmath at 50
  significant digits, written from the formulas, not from the service's code.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import mpmath
import numpy as np
from numpy.typing import NDArray

F32Array = NDArray[np.float32]
F64Array = NDArray[np.float64]
DIGITS: Final = 50

# ---------------------------------------------------------------------------------------------
# Independent implementations of the libraries that do not install here, written from their
# source's arithmetic (the operations, their order and their dtypes), not copied from it
# ---------------------------------------------------------------------------------------------


def pytorch_tutorial(max_len: int, d_model: int) -> F32Array:
    """The arithmetic of the PyTorch tutorial's ``PositionalEncoding`` (pytorch/tutorials,
    ``beginner_source/transformer_tutorial.py``), in torch: int64 positions times the float32
    frequencies ``exp(arange(0, d, 2) * (-ln 10000 / d))``, sines in the even columns and
    cosines in the odd ones (an odd ``d_model`` fails there as in the tutorial)."""
    torch = importlib.import_module("torch")
    positions = torch.arange(max_len)[:, None]
    frequencies = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(positions * frequencies)
    table[:, 1::2] = torch.cos(positions * frequencies)
    out: F32Array = table.numpy()
    return out


def fairseq_get_embedding(num_embeddings: int, embedding_dim: int, padding_idx: int) -> F32Array:
    """The arithmetic of fairseq's ``SinusoidalPositionalEmbedding.get_embedding``
    (``fairseq/modules/sinusoidal_positional_embedding.py``), in torch: ``n = d // 2``, the
    step ``ln 10000 / (n - 1)`` in Python floats, frequencies ``exp(k * -step)`` in float32,
    ``[sin | cos]`` of row times frequency, a zero column for an odd width, and row
    ``padding_idx`` zero. Row ``r`` is position id ``r``."""
    torch = importlib.import_module("torch")
    n = embedding_dim // 2
    step = math.log(10000) / (n - 1)
    frequencies = torch.exp(torch.arange(n, dtype=torch.float) * -step)
    angles = torch.arange(num_embeddings, dtype=torch.float)[:, None] * frequencies[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if embedding_dim % 2:
        table = torch.cat([table, torch.zeros(num_embeddings, 1)], dim=1)
    table[padding_idx, :] = 0
    out: F32Array = table.numpy()
    return out


def fairseq_make_positions(tokens: NDArray[np.int64], padding_idx: int) -> NDArray[np.int64]:
    """fairseq's ``utils.make_positions``: a token's table row is the count of non-padding
    tokens up to it in its sequence, plus ``padding_idx``; a padding token's is
    ``padding_idx`` (the zero row)."""
    real = (tokens != padding_idx).astype(np.int64)
    rows: NDArray[np.int64] = np.cumsum(real, axis=1) * real + padding_idx
    return rows


class NumpyFloat32Ops:
    """The TensorFlow 1 ops ``get_timing_signal_1d`` calls, on numpy arrays with TensorFlow's
    dtypes: ``range`` is int32, ``to_float`` float32, and a Python number meeting a float32
    array is converted to float32 first (TensorFlow's rule, and numpy 2's: NEP 50). exp, sin
    and cos are correctly rounded (float64 of the float32 argument, rounded once), where
    TensorFlow's own kernels are 1-2 float32 ulp off for about a fifth of their results."""

    @staticmethod
    def range(limit: int) -> NDArray[np.int32]:
        return np.arange(limit, dtype=np.int32)

    @staticmethod
    def to_float(x: Any) -> F32Array:
        return np.asarray(x).astype(np.float32)

    @staticmethod
    def maximum(x: F32Array, y: float) -> F32Array:
        return np.maximum(x, y)

    @staticmethod
    def exp(x: F32Array) -> F32Array:
        return np.exp(x.astype(np.float64)).astype(np.float32)

    @staticmethod
    def sin(x: F32Array) -> F32Array:
        return np.sin(x.astype(np.float64)).astype(np.float32)

    @staticmethod
    def cos(x: F32Array) -> F32Array:
        return np.cos(x.astype(np.float64)).astype(np.float32)

    @staticmethod
    def expand_dims(x: F32Array, axis: int) -> F32Array:
        return np.expand_dims(x, axis)

    @staticmethod
    def concat(values: Sequence[F32Array], axis: int) -> F32Array:
        return np.concatenate(values, axis=axis)

    @staticmethod
    def pad(x: F32Array, paddings: Sequence[Sequence[int]]) -> F32Array:
        return np.pad(x, paddings)

    @staticmethod
    def mod(x: int, y: int) -> int:
        return x % y

    @staticmethod
    def reshape(x: F32Array, shape: Sequence[int]) -> F32Array:
        return np.reshape(x, shape)


def tensor2tensor(
    length: int,
    channels: int,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
    start_index: int = 0,
    tf: Any = None,
) -> F32Array:
    """The arithmetic of tensor2tensor's ``get_timing_signal_1d``
    (``tensor2tensor/layers/common_attention.py``) on the ops ``tf`` (default
    :class:`NumpyFloat32Ops`; TensorFlow's ``compat.v1`` where it is installed): row ``r`` is
    position ``r + start_index``; ``inc = ln(max/min) / maximum(float(n) - 1, 1)`` in float32,
    ``inv = min * exp(float(range(n)) * -inc)``, ``[sin | cos]`` of position times ``inv``,
    and a zero column for an odd width."""
    ops = tf or NumpyFloat32Ops
    positions = ops.to_float(ops.range(length) + start_index)
    n = channels // 2
    increment = math.log(float(max_timescale) / float(min_timescale)) / ops.maximum(
        ops.to_float(n) - 1, 1
    )
    inverse = min_timescale * ops.exp(ops.to_float(ops.range(n)) * -increment)
    angles = ops.expand_dims(positions, 1) * ops.expand_dims(inverse, 0)
    signal = ops.concat([ops.sin(angles), ops.cos(angles)], axis=1)
    table: F32Array = np.asarray(ops.pad(signal, [[0, 0], [0, channels % 2]]))
    return table


def tf_tutorial(length: int, depth: int, tf: Any = None) -> F32Array:
    """The arithmetic of the TensorFlow tutorial's ``positional_encoding(length, depth)``
    (tensorflow/text, ``docs/tutorials/transformer.ipynb``): numpy float64 throughout
    (``depths = arange(depth / 2) / (depth / 2)``, ``rates = 1 / 10000**depths``),
    ``[sin | cos]``, then one cast to float32 (``tf``: TensorFlow itself where installed).
    An odd depth gives ``depth + 1`` columns, as there."""
    half = depth / 2
    depths = np.arange(half)[np.newaxis, :] / half
    angles = np.arange(length)[:, np.newaxis] * (1 / (10000**depths))
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    if tf is not None:
        return np.asarray(tf.cast(table, tf.float32))
    out: F32Array = table.astype(np.float32)
    return out


# ---------------------------------------------------------------------------------------------
# The presets' formulas in mpmath
# ---------------------------------------------------------------------------------------------

Kind = Literal["sin", "cos", "zero"]
Arrangement = Literal["interleaved", "split", "sin-cos", "cos-sin"]
# the presets' arrangement of columns (vaswani: interleaved, the default layout)
ARRANGEMENTS: Final[dict[str, Arrangement]] = {
    "vaswani": "interleaved",
    "pytorch-tutorial": "interleaved",
    "tf-tutorial": "sin-cos",
    "tensor2tensor": "sin-cos",
    "fairseq": "sin-cos",
    "whisper": "sin-cos",
    "musicgen": "cos-sin",
    "marian": "split",
    "keras": "interleaved",
    "positional-encodings": "interleaved",
    "mlx": "sin-cos",
}


def frequencies(preset: str, d: int, params: Mapping[str, Any]) -> list[mpmath.mpf]:
    """The frequency of each sine column (radians per position), from the preset's formula,
    at the working precision."""
    mpf = mpmath.mpf
    n = d // 2
    if preset in ("vaswani", "pytorch-tutorial", "tf-tutorial", "marian"):
        # base^(-2k/d) (the tutorials' exp(2k (-ln base / d)) and base^(-k / (d/2)))
        base = mpf(params.get("base", 10000.0))
        return [base ** (mpf(-2 * k) / d) for k in range((d + 1) // 2)]
    if preset == "keras":
        wavelength = mpf(params.get("max_wavelength", 10000.0))
        return [wavelength ** (mpf(-2 * k) / d) for k in range((d + 1) // 2)]
    if preset == "positional-encodings":
        channels = 2 * math.ceil(d / 2)
        base = mpf(params.get("base", 10000.0))
        return [base ** (mpf(-2 * k) / channels) for k in range((d + 1) // 2)]
    if preset in ("fairseq", "whisper", "musicgen"):
        # exp(-k ln(base) / (n - 1)) = base^(-k / (n - 1))
        base = mpf(params.get("base", 10000.0))
        return [base ** (mpf(-k) / (n - 1)) for k in range(n)]
    if preset == "tensor2tensor":
        # min_ts exp(-k ln(max_ts / min_ts) / max(n - 1, 1))
        low = mpf(params.get("min_timescale", 1.0))
        high = mpf(params.get("max_timescale", 1.0e4))
        return [low * (high / low) ** (mpf(-k) / max(n - 1, 1)) for k in range(n)]
    if preset == "mlx":
        # exp((1 - t) (ln max_freq - ln min_freq) + ln min_freq), t = k / (n - 1) (0 if n = 1),
        # times 2 pi with full_turns
        low = mpf(params.get("min_freq", 0.0001))
        high = mpf(params.get("max_freq", 1.0))
        turn = 2 * mpmath.pi if params.get("full_turns") else mpf(1)
        steps = [mpf(k) / (n - 1) if n > 1 else mpf(0) for k in range(n)]
        return [turn * high ** (1 - t) * low**t for t in steps]
    raise KeyError(preset)


def columns(preset: str, d: int, params: Mapping[str, Any]) -> list[tuple[Kind, int]]:
    """Each column's function and the index of its frequency."""
    arrangement = ARRANGEMENTS[preset]
    if preset == "mlx" and params.get("cos_first"):
        arrangement = "cos-sin"
    if arrangement == "interleaved":
        return [("sin" if j % 2 == 0 else "cos", j // 2) for j in range(d)]
    sines = (d + 1) // 2
    if arrangement == "split":
        return [("sin", k) for k in range(sines)] + [("cos", k) for k in range(d - sines)]
    n = d // 2
    first: Kind = "cos" if arrangement == "cos-sin" else "sin"
    second: Kind = "sin" if first == "cos" else "cos"
    zero: list[tuple[Kind, int]] = [("zero", 0)] if d % 2 else []
    return [(first, k) for k in range(n)] + [(second, k) for k in range(n)] + zero


def scale(preset: str, d: int, params: Mapping[str, Any]) -> mpmath.mpf:
    """The factor on the table: mlx's ``scale`` (default ``sqrt(2 / d)``), else 1."""
    if preset != "mlx":
        return mpmath.mpf(1)
    given = params.get("scale")
    return mpmath.sqrt(mpmath.mpf(2) / d) if given is None else mpmath.mpf(given)


def shift(preset: str, params: Mapping[str, Any]) -> int:
    """What the preset adds to a row's index to get its position (``start_index``)."""
    return int(params.get("start_index", 0)) if preset in ("tensor2tensor", "keras") else 0


def zero_row(preset: str, params: Mapping[str, Any]) -> int | None:
    """fairseq's padding row (``padding_idx``, default 1)."""
    return int(params.get("padding_idx", 1)) if preset == "fairseq" else None


@dataclass(frozen=True)
class Exact:
    """A block of a preset's table to 50 digits, as double-doubles: ``hi + lo`` is the entry
    to about 2^-106 relative; ``angle`` is each entry's angle (0 for zero columns), float64."""

    hi: F64Array
    lo: F64Array
    angle: F64Array


@functools.lru_cache(maxsize=64)
def _sincos(
    frequency_values: tuple[mpmath.mpf, ...], positions: tuple[int, ...]
) -> tuple[F64Array, F64Array, F64Array, F64Array, F64Array]:
    """sin and cos (each as hi, lo) and the angle of every position times every frequency."""
    shape = (len(positions), len(frequency_values))
    s_hi, s_lo, c_hi, c_lo, angle = (np.zeros(shape) for _ in range(5))
    with mpmath.workdps(DIGITS):
        for i, p in enumerate(positions):
            for k, w in enumerate(frequency_values):
                theta = p * w
                c, s = mpmath.cos_sin(theta)
                s_hi[i, k] = float(s)
                s_lo[i, k] = float(s - s_hi[i, k])
                c_hi[i, k] = float(c)
                c_lo[i, k] = float(c - c_hi[i, k])
                angle[i, k] = float(theta)
    return s_hi, s_lo, c_hi, c_lo, angle


def exact(preset: str, rows: Sequence[int], d: int, params: Mapping[str, Any]) -> Exact:
    """Rows ``rows`` of the preset's table (row ``r`` is position ``r + start_index``; fairseq's
    row ``padding_idx`` is zero), at :data:`DIGITS` digits."""
    with mpmath.workdps(DIGITS):
        frequency_values = tuple(frequencies(preset, d, params))
        factor = scale(preset, d, params)
    positions = tuple(int(r) + shift(preset, params) for r in rows)
    s_hi, s_lo, c_hi, c_lo, angle = _sincos(frequency_values, positions)
    layout = columns(preset, d, params)
    hi, lo, angles = (np.zeros((len(rows), d)) for _ in range(3))
    pick: Mapping[Kind, tuple[F64Array, F64Array]] = {
        "sin": (s_hi, s_lo),
        "cos": (c_hi, c_lo),
    }
    for j, (kind, k) in enumerate(layout):
        if kind == "zero":
            continue
        part_hi, part_lo = pick[kind]
        hi[:, j], lo[:, j], angles[:, j] = part_hi[:, k], part_lo[:, k], angle[:, k]
    if factor != 1:
        with mpmath.workdps(DIGITS):
            for i in range(len(rows)):
                for j in range(d):
                    value = (mpmath.mpf(hi[i, j]) + mpmath.mpf(lo[i, j])) * factor
                    hi[i, j] = float(value)
                    lo[i, j] = float(value - hi[i, j])
    padding = zero_row(preset, params)
    if padding is not None:
        chosen = np.asarray(rows) == padding
        hi[chosen], lo[chosen], angles[chosen] = 0.0, 0.0, 0.0
    return Exact(hi, lo, angles)


def error(values: NDArray[np.floating], truth: Exact) -> F64Array:
    """``|values - truth|``, the difference taken in double-double (not after rounding the
    truth to float64): ``values - hi`` is exact where the two are close."""
    wide = values.astype(np.float64)
    result: F64Array = np.abs((wide - truth.hi) - truth.lo)
    return result


def half_ulp32(truth: Exact) -> F64Array:
    """Half a float32 ulp of each entry's binade: the largest error of a correctly rounded
    float32 (0 where the entry is exactly 0)."""
    _, exponent = np.frexp(np.abs(truth.hi))
    result: F64Array = np.where(truth.hi == 0, 0.0, np.ldexp(1.0, exponent - 25))
    return result

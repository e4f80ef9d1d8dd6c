"""What the client's answers are checked against, without the service's code: the formulas
in NumPy (float64), and the same answers fetched by plain httpx in another format (``raw``),
which must agree bit for bit with what the client decoded."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

Array = NDArray[Any]


def sinusoidal(
    start: int, stop: int, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> NDArray[np.float64]:
    """The paper's table, rows ``start .. stop-1``, in float64: column ``k`` is pair
    ``k // 2``, a sine at even ``k``; ``split`` puts the sines first."""
    positions = np.arange(start, stop, dtype=np.float64)[:, None]
    pairs = np.arange(d_model) // 2
    angles = positions * base ** (-2.0 * pairs / d_model)
    table = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    if layout == "split":
        table = np.concatenate([table[:, 0::2], table[:, 1::2]], axis=1)
    return table


def fairseq(max_len: int, d_model: int, padding_idx: int, base: float = 10000.0) -> Array:
    """fairseq's ``SinusoidalPositionalEmbedding.get_embedding`` in float32 (as torch computes
    it): pair ``k`` at ``exp(-k ln(base) / (n - 1))``, sines then cosines, positions counted
    from ``padding_idx + 1`` and that row zero."""
    n = d_model // 2
    step = np.float32(np.log(base) / (n - 1))
    frequencies = np.exp(np.arange(n, dtype=np.float32) * -step)
    angles = np.arange(max_len, dtype=np.float32)[:, None] * frequencies[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    table[padding_idx] = 0
    return table


def rotary(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Array, Array]:
    """RoPE's cos and sin in float64, Hugging Face's ``half`` layout (the frequencies twice)."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(max_len, dtype=np.float64)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles), np.sin(angles)


def rotate_half(x: Array, cos: Array, sin: Array) -> Array:
    """Pairs ``(a, b) = (x[i], x[i + r/2])`` turned by the table's angles, in the table's
    dtype: ``a cos - b sin``, ``b cos + a sin``."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[:, :half], sin[:, :half]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def slopes(num_heads: int) -> NDArray[np.float64]:
    """Press et al.'s slopes: ``2^(-8k/c)`` for the first ``c`` (a power of two) heads, then
    every other slope of ``2c`` heads."""
    c = 1 << (num_heads.bit_length() - 1)
    first = 2.0 ** (-8.0 * np.arange(1, c + 1) / c)
    rest = 2.0 ** (-8.0 * np.arange(1, 2 * (num_heads - c), 2) / (2 * c))
    return np.concatenate([first, rest])


def raw(http: httpx.Client, path: str, **params: Any) -> Array:
    """The same answer as raw little-endian bytes, shaped by ``X-Shape`` and ``X-Dtype``."""
    response = http.get(path, params={**params, "format": "raw"})
    assert response.status_code == 200, response.text
    shape = tuple(int(n) for n in response.headers["x-shape"].split(","))
    dtype = np.dtype(response.headers["x-dtype"]).newbyteorder("<")
    return np.frombuffer(response.content, dtype=dtype).reshape(shape)

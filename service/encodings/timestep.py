"""Diffusion timestep embeddings: row ``t`` is the embedding of timestep ``t``, as diffusers
0.42.1 computes it (``models/embeddings.py::get_timestep_embedding``)::

    half = dim // 2
    f_i  = exp(-ln(max_period) * i / (half - downscale_freq_shift))     i < half
    a_i  = scale * (t * f_i)
    row  = [sin a | cos a]    ([cos a | sin a] with flip_sin_to_cos), a zero column last
                              for an odd dim

with the timesteps as the model receives them: cast to ``timestep_dtype`` (float32,
bfloat16 or float16, through float32 as torch converts), multiplied by ``time_factor`` in
that dtype (FLUX's ``t = time_factor * t``); a preset's pipeline may divide them first, and
round them more (FLUX's sampler and diffusers' pipeline, Qwen-Image's, :data:`HOPS`). Rows
of the ``GET`` table are the scheduler's integer timesteps (σ·1000 for the flow-matching
models); any finite timesteps are taken by :func:`at`.

``rounding=library`` is the named code's arithmetic operation by operation: float32 for
diffusers, DiT, guided-diffusion and FLUX (``f32(-ln P) * i``, the division, exp, the
product, the scale, sin and cos each rounded to float32), float64 for Wan's upstream
``sinusoidal_embedding_1d`` (cast to the answer's dtype at the end). The float32 exp, sin
and cos are the library engine's (:mod:`service.encodings.kernels`): torch's own with the
torch engine (bit for bit), else correctly rounded, where torch's are not, so an entry may
differ from torch's by an ulp (about 5 % of a float32 table's entries; the conformance
tests measure it). ``rounding=exact``: the real-valued formula at the received timesteps
(double-double angles, :mod:`service.encodings._exact`), each entry rounded once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact, _library, kernels
from service.encodings.registry import (
    DTYPES,
    ROUNDINGS,
    Angles,
    Audit,
    AuditPath,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    Source,
    Values,
    register,
    replacing,
)
from service.errors import InvalidParameter

TimestepDType = Literal["float32", "bfloat16", "float16"]
TIMESTEP_DTYPES: Final[tuple[TimestepDType, ...]] = get_args(TimestepDType)
# the library's arithmetic: float32 (torch's, as diffusers computes) or float64 (Wan's own)
Arithmetic = Literal["float32", "float64"]
# how the scheduler's timesteps reach the embedding (:data:`HOPS`)
Hop = Literal["model", "sampler", "pipeline", "divided", "divided-float32"]
PARAMETERS: Final = (
    "flip_sin_to_cos",
    "downscale_freq_shift",
    "scale",
    "max_period",
    "time_factor",
    "timestep_dtype",
)
# exact angles are exact (double-double) up to this many radians, as sinusoidal's positions
_LARGEST_ANGLE: Final = 2.0**31
_LARGEST_EXPONENT: Final = 88.0  # float32's exp overflows past 88.72
_CHUNK_ELEMENTS: Final = 1 << 16
F32 = np.float32
_LARGEST: Final[Mapping[TimestepDType, float]] = {
    "float32": float(np.finfo(F32).max),
    "bfloat16": 3.3895313892515355e38,
    "float16": 65504.0,
}


@dataclass(frozen=True, slots=True)
class Preset:
    """A model's timestep embedding: its sources, its parameters (what it fixes; the
    function's defaults for the rest), the parameters a client may still give (``takes``),
    the arithmetic of ``rounding=library``, how timesteps reach the embedding (``hop``),
    whether its code takes even widths only, and what its timesteps are."""

    name: str
    description: str
    sources: tuple[Source, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    takes: tuple[str, ...] = ("timestep_dtype",)
    arithmetic: Arithmetic = "float32"
    hop: Hop = "model"
    even: bool = False
    timesteps: str = "integer timesteps 0 .. 999 as the scheduler gives them"

    @property
    def rows(self) -> str:
        """What row ``r`` of its table is: the timestep ``r``, in these units."""
        return f"row r is the timestep r: {self.timesteps}"


DEFAULTS: Final[Mapping[str, Any]] = {
    "flip_sin_to_cos": False,
    "downscale_freq_shift": 1.0,
    "scale": 1.0,
    "max_period": 10000.0,
    "time_factor": 1.0,
    "timestep_dtype": "float32",
}
_EMBEDDINGS: Final = Source(
    "huggingface/diffusers", "0.42.1", "src/diffusers/models/embeddings.py", "Timesteps"
)
_FLIPPED: Final[Mapping[str, Any]] = {"flip_sin_to_cos": True, "downscale_freq_shift": 0.0}
PRESETS: Final[Mapping[str, Preset]] = {
    preset.name: preset
    for preset in (
        Preset(
            "diffusers",
            "get_timestep_embedding with its defaults; every parameter may be given",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/embeddings.py",
                    "get_timestep_embedding",
                ),
            ),
            takes=PARAMETERS,
            timesteps="the timesteps the function is given",
        ),
        Preset(
            "unet",
            "Stable Diffusion 1.x/2.x/SDXL's UNet (flip_sin_to_cos, freq_shift 0), also SD3, "
            "PixArt-α/Σ, HunyuanVideo, CogVideoX: Timesteps(dim, True, 0)",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/unets/unet_2d_condition.py",
                    "UNet2DConditionModel",
                ),
                _EMBEDDINGS,
            ),
            _FLIPPED,
        ),
        Preset(
            "guided-diffusion",
            "ADM, GLIDE and DiT: exp(-ln(max_period) * i / half), [cos | sin]",
            (
                Source(
                    "openai/guided-diffusion",
                    "22e0df8",
                    "guided_diffusion/nn.py",
                    "timestep_embedding",
                ),
                Source(
                    "facebookresearch/DiT",
                    "ed81ce2",
                    "models.py",
                    "TimestepEmbedder.timestep_embedding",
                ),
            ),
            _FLIPPED,
        ),
        Preset(
            "ddpm",
            "DDPM's own (ln(10000) / (half - 1), [sin | cos]) as diffusers' UNet2DModel "
            "reads the DDPM checkpoints' configs (flip_sin_to_cos false, freq_shift 1)",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/unets/unet_2d.py",
                    "UNet2DModel",
                ),
                Source(
                    "hojonathanho/diffusion",
                    "1e0dceb",
                    "diffusion_tf/nn.py",
                    "get_timestep_embedding",
                ),
            ),
            {"flip_sin_to_cos": False, "downscale_freq_shift": 1.0},
        ),
        Preset(
            "flux",
            "FLUX.1's reference sampler: σ = t / 1000 in bfloat16, then 1000 * σ in "
            "bfloat16, [cos | sin] of float32 angles",
            (
                Source(
                    "black-forest-labs/flux",
                    "802fb47",
                    "src/flux/modules/layers.py",
                    "timestep_embedding",
                ),
                Source("black-forest-labs/flux", "802fb47", "src/flux/sampling.py", "denoise"),
            ),
            {**_FLIPPED, "time_factor": 1000.0, "timestep_dtype": "bfloat16"},
            hop="sampler",
            timesteps="σ·1000 (the sampler passes σ = t / 1000)",
        ),
        Preset(
            "flux-diffusers",
            "FLUX.1 in diffusers' pipeline: t = σ·1000 in bfloat16, t / 1000 in bfloat16, "
            "times 1000 in bfloat16 (three roundings), Timesteps(256, True, 0)",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/pipelines/flux/pipeline_flux.py",
                    "FluxPipeline.__call__",
                ),
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/transformers/transformer_flux.py",
                    "FluxTransformer2DModel.forward",
                ),
                _EMBEDDINGS,
            ),
            {**_FLIPPED, "time_factor": 1000.0, "timestep_dtype": "bfloat16"},
            hop="pipeline",
            timesteps="σ·1000, as the scheduler's timesteps",
        ),
        Preset(
            "wan",
            "Wan 2.x upstream: sinusoidal_embedding_1d in float64 throughout, [cos | sin], "
            "cast to float32 by the caller (diffusers' Wan is unet's, in float32)",
            (
                Source(
                    "Wan-Video/Wan2.1",
                    "9737cba",
                    "wan/modules/model.py",
                    "sinusoidal_embedding_1d",
                ),
            ),
            _FLIPPED,
            arithmetic="float64",
            even=True,
        ),
        Preset(
            "qwen-image",
            "Qwen-Image: its pipeline passes t / 1000 computed in the model's dtype; "
            "Timesteps(256, True, 0, scale=1000), the scale after the product",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/pipelines/qwenimage/pipeline_qwenimage.py",
                    "QwenImagePipeline.__call__",
                ),
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/transformers/transformer_qwenimage.py",
                    "QwenTimestepProjEmbeddings",
                ),
                _EMBEDDINGS,
            ),
            {**_FLIPPED, "scale": 1000.0, "timestep_dtype": "bfloat16"},
            hop="divided",
            timesteps="σ·1000 (the pipeline passes σ = t / 1000)",
        ),
        Preset(
            "auraflow",
            "AuraFlow: its pipeline passes t / 1000 computed in float32, cast to the model's "
            "dtype; Timesteps(256, True, 0, scale=1000), the scale after the product",
            (
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/pipelines/aura_flow/pipeline_aura_flow.py",
                    "AuraFlowPipeline.__call__",
                ),
                Source(
                    "huggingface/diffusers",
                    "0.42.1",
                    "src/diffusers/models/transformers/auraflow_transformer_2d.py",
                    "AuraFlowTransformer2DModel",
                ),
                _EMBEDDINGS,
            ),
            {**_FLIPPED, "scale": 1000.0, "timestep_dtype": "bfloat16"},
            hop="divided-float32",
            timesteps="σ·1000 (the pipeline passes σ = t / 1000)",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class TimestepKey:
    """Everything that changes a timestep table's values: its width, the embedding's
    parameters (diffusers' names; FLUX's ``time_factor``; the timesteps' dtype), the preset
    (its arithmetic and hop), the rounding and the answer's dtype."""

    dim: int
    flip_sin_to_cos: bool = False
    downscale_freq_shift: float = 1.0
    scale: float = 1.0
    max_period: float = 10000.0
    time_factor: float = 1.0
    timestep_dtype: TimestepDType = "float32"
    preset: str = "diffusers"
    rounding: Rounding = "library"
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise InvalidParameter("dim", "must be a positive integer")
        if self.preset not in PRESETS:
            raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
        if PRESETS[self.preset].even and self.dim % 2:
            raise InvalidParameter("dim", f"must be even for preset {self.preset}")
        if not (math.isfinite(self.max_period) and self.max_period > 1):
            raise InvalidParameter("max_period", "must be a finite number greater than 1")
        for name in ("downscale_freq_shift", "scale", "time_factor"):
            if not math.isfinite(getattr(self, name)):
                raise InvalidParameter(name, "must be a finite number")
        if self.timestep_dtype not in TIMESTEP_DTYPES:
            raise InvalidParameter("timestep_dtype", f"must be one of {', '.join(TIMESTEP_DTYPES)}")
        if self.rounding not in ROUNDINGS:
            raise InvalidParameter("rounding", f"must be one of {', '.join(ROUNDINGS)}")
        if self.dtype not in DTYPES:
            raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")
        half = self.half
        denominator = half - self.downscale_freq_shift
        if half and denominator == 0:
            raise InvalidParameter(
                "downscale_freq_shift",
                f"must not be dim // 2 ({half}): the exponent divides by dim // 2 minus it",
                also=("dim",),
            )
        if half > 1 and denominator < 0:
            largest = math.log(self.max_period) * (half - 1) / -denominator
            if largest > _LARGEST_EXPONENT:
                raise InvalidParameter(
                    "downscale_freq_shift",
                    f"past dim // 2 ({half}) makes frequencies up to e^{largest:.4g}, past "
                    "float32's range",
                    also=("max_period", "dim"),
                )

    @property
    def width(self) -> int:
        return self.dim

    @property
    def half(self) -> int:
        """Frequencies: one per sine column."""
        return self.dim // 2

    def settings(self) -> dict[str, Any]:
        """The embedding's parameters by their names."""
        return {name: getattr(self, name) for name in PARAMETERS}


def preset_key(
    dim: int, preset: str, given: Mapping[str, Any], rounding: Rounding, dtype: DType
) -> TimestepKey:
    """The key of ``preset``'s embedding of width ``dim`` with the parameters a client gave
    (``None``: not given): a parameter the preset fixes is an :class:`InvalidParameter`."""
    if preset not in PRESETS:
        raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[preset]
    settings = {**DEFAULTS, **chosen.settings}
    for name, value in given.items():
        if value is None:
            continue
        if name not in chosen.takes:
            raise InvalidParameter(
                name,
                f"is fixed by preset {preset} ({settings[name]}): give it with "
                "preset=diffusers, which takes every parameter",
            )
        settings[name] = value
    return TimestepKey(dim, **settings, preset=preset, rounding=rounding, dtype=dtype)


def narrowed(values: NDArray[np.float32], dtype: TimestepDType) -> NDArray[np.float32]:
    """float32 values rounded to ``dtype`` (to nearest, ties to even), as float32."""
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return values.astype(np.float16).astype(F32)
    if dtype == "bfloat16":
        bits = values.view(np.uint32).astype(np.uint64)
        nearest = bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))
        return (nearest & np.uint64(0xFFFF0000)).astype(np.uint32).view(F32)
    return values


@dataclass(frozen=True, slots=True)
class Hops:
    """How a preset's model receives the scheduler's timesteps ``t``: ``narrow``, the
    timesteps as its embedding takes them (every value of a narrow dtype is a float32;
    infinite past the dtype's range, as torch makes them), and ``real``, the real number
    they stand for (the audit's reference, never cast)."""

    description: str
    narrow: Callable[[TimestepKey, NDArray[np.float64]], NDArray[np.float32]]
    real: Callable[[TimestepKey, NDArray[np.float64]], NDArray[np.float64]]


def _cast(key: TimestepKey, values: NDArray[Any]) -> NDArray[np.float32]:
    """Values cast to the timesteps' dtype through float32, as torch converts."""
    return narrowed(np.asarray(values).astype(F32), key.timestep_dtype)


def _times_factor(key: TimestepKey, t: NDArray[np.float32]) -> NDArray[np.float32]:
    """``time_factor * t`` in the timesteps' dtype (torch computes a narrow tensor times a
    number in float32, rounded once)."""
    return _cast(key, t * _library.f32(key.time_factor)) if key.time_factor != 1 else t


_PASSED: Final = 1000.0  # Qwen-Image's and AuraFlow's pipelines pass t / 1000
HOPS: Final[Mapping[Hop, Hops]] = {
    "model": Hops(
        "cast to timestep_dtype, times time_factor in it",
        lambda key, t: _times_factor(key, _cast(key, t)),
        lambda key, t: t * key.time_factor,
    ),
    "sampler": Hops(
        "σ = t / time_factor (in float64, as the sampler's schedule) cast to timestep_dtype, "
        "times time_factor in it",
        lambda key, t: _times_factor(key, _cast(key, t / key.time_factor)),
        lambda key, t: t,
    ),
    "pipeline": Hops(
        "cast to timestep_dtype, divided by time_factor in it, times time_factor in it",
        lambda key, t: _times_factor(
            key, _cast(key, _cast(key, t) / _library.f32(key.time_factor))
        ),
        lambda key, t: t,
    ),
    "divided": Hops(
        "cast to timestep_dtype, divided by 1000 in it",
        lambda key, t: _cast(key, _cast(key, t) / F32(_PASSED)),
        lambda key, t: t / _PASSED,
    ),
    "divided-float32": Hops(
        "divided by 1000 in float32, then cast to timestep_dtype",
        lambda key, t: _cast(key, t.astype(F32) / F32(_PASSED)),
        lambda key, t: t / _PASSED,
    ),
}


def hop(key: TimestepKey, timesteps: NDArray[Any]) -> NDArray[np.float32]:
    """The scheduler's timesteps as the preset's model receives them (:data:`HOPS`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return HOPS[PRESETS[key.preset].hop].narrow(key, np.asarray(timesteps, np.float64))


def received(key: TimestepKey, timesteps: NDArray[Any]) -> NDArray[np.float32]:
    """:func:`hop`'s timesteps, refused where the dtype or the factor makes them infinite."""
    with np.errstate(over="ignore"):
        cast = _cast(key, timesteps)
    if not np.isfinite(cast).all():
        largest = float(_LARGEST[key.timestep_dtype])
        raise InvalidParameter(
            "timestep_dtype",
            f"holds timesteps up to {largest:g} only: these reach past it",
        )
    t = hop(key, timesteps)
    if not np.isfinite(t).all():
        raise InvalidParameter(
            "time_factor",
            f"takes timesteps past {key.timestep_dtype}'s range (or is past float32's)",
        )
    return t


def library_frequencies(key: TimestepKey) -> NDArray[np.float32]:
    """diffusers' float32 frequencies: ``exp(f32(-ln P) * i / f32(half - shift))``, exp the
    library engine's."""
    exponent = _library.f32(-math.log(key.max_period)) * np.arange(key.half).astype(F32)
    exponent = exponent / _library.f32(key.half - key.downscale_freq_shift)
    return kernels.exp(exponent)


def _library32(key: TimestepKey, t: NDArray[np.float32]) -> tuple[Rows, Rows]:
    """diffusers' float32 arithmetic, each step rounded where torch rounds it, exp, sin and
    cos the library engine's (:mod:`.kernels`)."""
    frequencies = library_frequencies(key)
    with np.errstate(over="ignore", invalid="ignore"):
        angles = t[:, None] * frequencies[None, :]
        angles = _library.f32(key.scale) * angles
        return kernels.sin(angles), kernels.cos(angles)


def _library64(key: TimestepKey, t: NDArray[np.float32]) -> tuple[Rows, Rows]:
    """Wan's float64 arithmetic: ``pow(max_period, -(arange(half) / (half - shift)))``,
    the outer product, cos and sin, all float64."""
    half = key.half
    exponents = -(np.arange(half, dtype=np.float64) / (half - key.downscale_freq_shift))
    frequencies = np.power(key.max_period, exponents)
    with np.errstate(over="ignore", invalid="ignore"):
        angles = np.outer(t.astype(np.float64), frequencies) * key.scale
        return np.sin(angles), np.cos(angles)


def frequencies(key: TimestepKey) -> tuple[Values, Values]:
    """``scale * max_period^(-i / (half - shift))`` as double-double ``(hi, lo)``."""
    denominator = 2 * (key.half - key.downscale_freq_shift)
    w_hi, w_lo = _exact.inverse_powers(key.max_period, denominator, key.half)
    return _exact.dd_mul(w_hi, w_lo, key.scale, 0.0)


def _exact_sincos(key: TimestepKey, t: NDArray[np.floating]) -> tuple[Rows, Rows]:
    """sin and cos of ``scale * t * f_i`` from double-double frequencies (angles within
    :func:`_within`'s reach)."""
    w_hi, w_lo = frequencies(key)
    return _exact.sincos(t.astype(np.float64), w_hi, w_lo)


def _fastest(key: TimestepKey) -> float:
    """The largest frequency's magnitude, ``|scale| max_period^(-i / (half - shift))`` at
    ``i = 0`` (1), or at ``i = half - 1`` where the shift passes ``half``."""
    if key.half < 2 or key.half - key.downscale_freq_shift > 0:
        return abs(key.scale)
    exponent = -(key.half - 1) / (key.half - key.downscale_freq_shift)
    return abs(key.scale) * math.exp(math.log(key.max_period) * exponent)


def _within(key: TimestepKey, t: NDArray[np.floating]) -> NDArray[np.bool_]:
    """The timesteps whose exact angles are exact (double-double): up to 2^31 radians."""
    within: NDArray[np.bool_] = np.abs(t.astype(np.float64)) * _fastest(key) <= _LARGEST_ANGLE
    return within


def _refuse_exact(key: TimestepKey, t: NDArray[np.floating]) -> None:
    if not _within(key, t).all():
        largest = float(np.abs(t).max()) * _fastest(key)
        raise InvalidParameter(
            "rounding",
            f"exact angles are computed up to 2^31 radians, and these reach {largest:.4g}: "
            "ask for rounding=library, or smaller timesteps or scale",
            also=("scale",),
        )


def at(key: TimestepKey, timesteps: NDArray[Any]) -> Rows:
    """The embeddings of ``timesteps`` (any finite numbers, ``(N,)``), one row each; a
    timestep the key cannot take is refused (:class:`InvalidParameter`)."""
    arithmetic = "exact" if key.rounding == "exact" else PRESETS[key.preset].arithmetic
    return along(key, timesteps, arithmetic)


def along(
    key: TimestepKey,
    timesteps: NDArray[Any],
    arithmetic: Arithmetic | Rounding,
    strict: bool = True,
) -> Rows:
    """The embeddings of ``timesteps`` as ``key`` receives them, computed in ``arithmetic``
    (a library's float32 or float64, or ``exact``): the table's, or an audit's path. Not
    ``strict``, a timestep the key cannot take (past the narrow dtype, or an exact angle
    past 2^31) gets a row of zeros: a page of the table kept past its last row, which no
    table serves (:func:`reach` refuses a table whose last timestep the key cannot take,
    and the timesteps reach further as they grow)."""
    out = np.zeros((len(timesteps), key.dim), dtype=key.dtype)
    half = key.half
    if not half:
        return out
    t = received(key, timesteps) if strict else hop(key, timesteps)
    if strict and arithmetic == "exact":
        _refuse_exact(key, t)
    kept = np.isfinite(t)
    if arithmetic == "exact":
        kept &= _within(key, np.where(kept, t, 0))
    taken = np.flatnonzero(kept)
    rows = max(1, _CHUNK_ELEMENTS // half)
    compute = {"exact": _exact_sincos, "float64": _library64, "float32": _library32}[arithmetic]
    first_half, second_half = out[:, :half], out[:, half : 2 * half]
    sines, cosines = (second_half, first_half) if key.flip_sin_to_cos else (first_half, second_half)
    for first in range(0, len(taken), rows):
        chunk = taken[first : first + rows]
        s, c = compute(key, t[chunk])
        sines[chunk] = s
        cosines[chunk] = c
    return out


def reach(key: TimestepKey, max_len: int) -> None:
    """Refuse a table of ``max_len`` rows whose last timestep ``key`` cannot take (its
    narrow dtype's range, or an exact angle past 2^31): every row before it can."""
    last = received(key, np.array([max_len - 1], dtype=np.float64))
    if key.rounding == "exact":
        _refuse_exact(key, last)


def take(key: TimestepKey, positions: NDArray[np.int64]) -> Rows:
    """The rows of the integer timesteps ``positions`` (zeros where the key cannot take
    them: past the last row of any table served, :func:`reach`)."""
    arithmetic = "exact" if key.rounding == "exact" else PRESETS[key.preset].arithmetic
    return along(key, positions, arithmetic, strict=False)


def fill(key: TimestepKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part), dtype=np.int64))
        start += len(part)


def bound(key: TimestepKey) -> Bound:
    """Entries are sines and cosines; angles that overflow make them NaN."""
    return Bound(1.0, ("scale", "time_factor", "timestep_dtype"))


def entries(key: TimestepKey, rows: Rows) -> Values:
    """What an audit compares of a row: each frequency's cosine, then its sine (the zero
    column of an odd width left out)."""
    half = key.half
    first, second = rows[:, :half], rows[:, half : 2 * half]
    sines, cosines = (second, first) if key.flip_sin_to_cos else (first, second)
    return np.concatenate([cosines, sines], axis=1).astype(np.float64)


def _real(key: TimestepKey, positions: NDArray[np.int64]) -> Values:
    """The timesteps the formula takes at these rows, uncast (:attr:`Hops.real`)."""
    return HOPS[PRESETS[key.preset].hop].real(key, positions.astype(np.float64))


def exact_at(key: TimestepKey, positions: NDArray[np.int64]) -> Values:
    """The audit's reference: the real-valued formula at the rows' real timesteps (FLUX's
    ``1000 σ``), never cast to a narrow dtype, each pair's cos then sin."""
    if not key.half:
        return np.zeros((len(positions), 0))
    real = _real(key, positions)
    _refuse_exact(key, real)
    s, c = _exact_sincos(key, real)
    return np.concatenate([c, s], axis=1)


def _along(
    arithmetic: Arithmetic | None = None, timestep_dtype: TimestepDType | None = None
) -> Callable[[TimestepKey, NDArray[np.int64]], Values]:
    """An audit path: the key's table with another arithmetic or timesteps' dtype, as
    float64 entries (NaN where the narrow timesteps are infinite, as a model's are)."""

    def values(key: TimestepKey, positions: NDArray[np.int64]) -> Values:
        if timestep_dtype is not None:
            key = dataclasses.replace(key, timestep_dtype=timestep_dtype)
        computes = arithmetic or PRESETS[key.preset].arithmetic
        finite = np.isfinite(hop(key, positions))
        out = np.full((len(positions), 2 * key.half), np.nan)
        if finite.any():
            out[finite] = entries(key, along(key, positions[finite], computes))
        return out

    return values


def _turned(key: TimestepKey, at: NDArray[np.float32], inverse: NDArray[np.float32]) -> Values:
    """The float32 entries at timesteps ``at`` with these frequencies (``scale`` in them)."""
    with np.errstate(over="ignore", invalid="ignore"):
        angles = at[:, None] * inverse[None, :]
        s, c = kernels.sin(angles), kernels.cos(angles)
    return np.concatenate([c, s], axis=1).astype(np.float64)


def _scaled_frequencies(key: TimestepKey) -> NDArray[np.float32]:
    """The library's frequencies with ``scale`` in them, as the device envelope takes them."""
    with np.errstate(over="ignore"):
        scaled: NDArray[np.float32] = library_frequencies(key) * _library.f32(key.scale)
    return scaled


def _positions(key: TimestepKey, positions: NDArray[np.int64]) -> tuple[Values, Values]:
    """The rows' real timesteps, and the timesteps the library receives (infinite past the
    narrow dtype)."""
    return _real(key, positions), hop(key, positions).astype(np.float64)


_TIMESTEPS: Final = (
    "The timesteps cast to {} (times time_factor in it, as the preset does) before the "
    "embedding{}, the key's arithmetic."
)
AUDIT: Final[Audit[TimestepKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64"),
    library=replacing(rounding="library", dtype="float32"),
    width=lambda key: 2 * key.half,
    entries=entries,
    exact_at=exact_at,
    angles=Angles(
        pairs=lambda key: key.half,
        exact=lambda key: frequencies(key)[0],
        library=_scaled_frequencies,
        turned=_turned,
        attention=lambda key: 1.0,
        # CUDA's expf: 2 ulp; the CPU's: 1; the scale's product after the angle's: 1
        ulps=lambda key: 4.0,
        received=_positions,
        device="What a GPU's math library may produce (an estimate): an envelope from the "
        "documented ulp bounds of CUDA's expf and the product's rounding (4 ulp of each "
        "frequency), sinf and cosf (2 ulp), at the timesteps the model receives; its errors "
        "are the envelope's, the largest a device may give.",
    ),
    paths=("library", "bf16-table", "fp16-table", "device"),
    own=(
        AuditPath(
            "library",
            "The preset's own arithmetic (diffusers' float32, Wan's float64), the key's "
            "timesteps as the model receives them: the service's rounding=library table.",
            lambda key, positions: entries(key, take(key, positions)),
        ),
        AuditPath(
            "float32-timesteps",
            _TIMESTEPS.format("float32", " (integers exact to 2^24)"),
            _along(timestep_dtype="float32"),
        ),
        AuditPath(
            "bf16-timesteps",
            _TIMESTEPS.format("bfloat16", ": integers past 256 rounded (FLUX's sampler)"),
            _along(timestep_dtype="bfloat16"),
        ),
        AuditPath(
            "fp16-timesteps",
            _TIMESTEPS.format("float16", ": integers past 2048 rounded, past 65504 infinite"),
            _along(timestep_dtype="float16"),
        ),
        AuditPath(
            "float32-angles",
            "diffusers' float32 arithmetic (get_timestep_embedding), the key's timesteps.",
            _along(arithmetic="float32"),
        ),
        AuditPath(
            "float64-angles",
            "Wan's upstream float64 arithmetic (sinusoidal_embedding_1d), rounded to float32 "
            "at the end, the key's timesteps.",
            _along(arithmetic="float64"),
        ),
    ),
)


def engine(key: TimestepKey) -> bool:
    """Whether the key's table is computed with the library engine's exp, sin and cos: the
    float32 library path."""
    return key.rounding == "library" and PRESETS[key.preset].arithmetic == "float32"


FAMILY: Final = register(
    Family("timestep", TimestepKey, fill, take, bound, audit=AUDIT, presets=PRESETS, engine=engine)
)

"""The timestep family's parameters on the wire (``GET /v1/encodings/timestep`` and ``POST
.../positions``): diffusers' names, FLUX's ``time_factor``, the timesteps' dtype, and a
preset (:data:`service.encodings.timestep.PRESETS`) that fixes a model's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import DType, Rounding
from service.encodings.timestep import PARAMETERS, PRESETS, TimestepDType, TimestepKey, preset_key
from service.schemas.common import Window
from service.settings import POSITION_CEILING

# mypy reads a str; pydantic and the OpenAPI document the presets' names (as the sinusoidal
# presets': made from the table when this module is imported)
if TYPE_CHECKING:
    PresetName = str
else:
    PresetName = Literal[tuple(PRESETS)]
_FIXED = "Default: the preset's; only preset=diffusers takes it (flux presets and others fix it)."


class TimestepQuery(Window):
    """Which embedding: its width, a preset, the function's parameters (diffusers'
    names), which rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int = Field(
        ge=1, le=POSITION_CEILING + 1, description="Integer timesteps 0 .. max_len-1."
    )
    dim: int = Field(ge=1, le=1 << 20, description="Embedding width (odd: a zero column last).")
    preset: PresetName = Field(
        "diffusers",
        description="diffusers (get_timestep_embedding's defaults, every parameter may be "
        "given), unet, guided-diffusion, ddpm, flux, flux-diffusers, wan, qwen-image.",
    )
    flip_sin_to_cos: bool | None = Field(None, description=f"[cos | sin] if true. {_FIXED}")
    downscale_freq_shift: float | None = Field(
        None,
        ge=-1e6,
        le=1e6,
        allow_inf_nan=False,
        description=f"f_i = max_period^(-i / (dim // 2 - downscale_freq_shift)). {_FIXED}",
    )
    scale: float | None = Field(
        None,
        ge=-1e12,
        le=1e12,
        allow_inf_nan=False,
        description=f"Times the angle, after t * f (Qwen-Image: 1000). {_FIXED}",
    )
    max_period: float | None = Field(
        None, gt=1, le=1e300, allow_inf_nan=False, description=f"10000. {_FIXED}"
    )
    time_factor: float | None = Field(
        None,
        ge=-1e30,
        le=1e30,
        allow_inf_nan=False,
        description=f"Times the timesteps in timestep_dtype first (FLUX: 1000). {_FIXED}",
    )
    timestep_dtype: TimestepDType | None = Field(
        None,
        description="The timesteps cast as the model receives them (through float32, as "
        "torch converts): float32, bfloat16 (FLUX's), float16. Default: the preset's.",
    )
    start: int = Field(0, ge=0, description="First timestep returned (inclusive).")
    stop: int | None = Field(None, ge=1, description="Timestep after the last; default max_len.")
    rounding: Rounding = Field(
        "library",
        description="library: the named code's arithmetic (float32; Wan's float64); exact: "
        "the formula at the received timesteps, each entry rounded once.",
    )
    dtype: DType = Field("float32", description="Element type of the answer.")
    format: TableFormat | None = Field(
        None, description="json, npy, raw or safetensors; default by Accept."
    )

    def key(self) -> TimestepKey:
        given = {name: getattr(self, name) for name in PARAMETERS}
        return preset_key(self.dim, self.preset, given, self.rounding, self.dtype)

    def describe(self, key: TimestepKey) -> dict[str, Any]:
        """The JSON answer's fields before ``data``: the parameters as resolved."""
        return {
            "max_len": self.max_len,
            "dim": key.dim,
            "preset": key.preset,
            **key.settings(),
            "start": self.start,
            "stop": self.row_stop,
            "rounding": key.rounding,
            "dtype": key.dtype,
            "shape": [self.row_stop - self.start, key.dim],
        }


class TimestepDocument(BaseModel):
    """The embeddings as JSON: the parameters as resolved, then ``data``, a row a timestep."""

    max_len: int
    dim: int
    preset: PresetName
    flip_sin_to_cos: bool
    downscale_freq_shift: float
    scale: float
    max_period: float
    time_factor: float
    timestep_dtype: TimestepDType
    start: int
    stop: int
    rounding: Rounding
    dtype: DType
    shape: list[int] = Field(description="[stop - start, dim]")
    data: list[list[float]] = Field(description="The embedding of each timestep, a row each.")

"""The presets on the wire: which convention's table a request asks for (shared by the
tables, the pictures and apply), and the ``GET /v1/presets`` document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.encodings import presets
from service.encodings.catalogue import PRESETS
from service.encodings.registry import DType
from service.encodings.sinusoidal import Rounding, SinusoidalKey
from service.settings import POSITION_CEILING

PresetName = Literal[
    "vaswani",
    "pytorch-tutorial",
    "tf-tutorial",
    "tensor2tensor",
    "fairseq",
    "whisper",
    "musicgen",
    "marian",
    "keras",
    "positional-encodings",
    "mlx",
]
# the presets' own parameters, each taken by the presets that list it
PRESET_PARAMETERS = (
    "min_timescale",
    "max_timescale",
    "start_index",
    "padding_idx",
    "max_wavelength",
    "min_freq",
    "max_freq",
    "cos_first",
    "full_turns",
)


class PresetFields(BaseModel):
    """Which convention's table: a preset, its rounding, and its own parameters (each is
    refused by a preset that does not take it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: PresetName = Field(
        "vaswani",
        description="Whose table: the paper's (vaswani) or a library's; GET /v1/presets lists "
        "them with the library function each follows.",
    )
    rounding: Rounding = Field(
        "library",
        description="library: the library's own arithmetic (float32 where it computes in "
        "float32), as the model saw it; exact: the preset's formula, rounded once. The same "
        "for vaswani.",
    )
    min_timescale: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="tensor2tensor: default 1."
    )
    max_timescale: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="tensor2tensor: default 10000."
    )
    start_index: int | None = Field(
        None,
        ge=0,
        le=POSITION_CEILING,
        description="tensor2tensor, keras: position of row 0; default 0.",
    )
    padding_idx: int | None = Field(
        None,
        ge=0,
        le=POSITION_CEILING,
        description="fairseq: the row that is all zeros; real tokens start at padding_idx + 1; "
        "default 1.",
    )
    max_wavelength: float | None = Field(
        None, gt=1, allow_inf_nan=False, description="keras: default 10000."
    )
    min_freq: float | None = Field(None, gt=0, allow_inf_nan=False, description="mlx: 0.0001.")
    max_freq: float | None = Field(None, gt=0, allow_inf_nan=False, description="mlx: 1.")
    cos_first: bool | None = Field(None, description="mlx: cosines first; default false.")
    full_turns: bool | None = Field(None, description="mlx: frequencies times 2 pi; false.")

    def given(self) -> dict[str, Any]:
        """The presets' parameters as given (``None``: not given)."""
        return {name: getattr(self, name) for name in PRESET_PARAMETERS}

    def preset_key(self, d_model: int, dtype: DType, **more: Any) -> SinusoidalKey:
        """The key of this preset's table of width ``d_model``: ``base`` and ``layout``
        (fields of the models that use this one) count where the client gave them."""
        preset = PRESETS[self.preset]
        chosen = self.model_fields_set
        base = getattr(self, "base", None) if "base" in chosen else None
        layout = getattr(self, "layout", None) if "layout" in chosen else None
        given = {**self.given(), "base": base, **more}
        if d_model < preset.min_d or (preset.odd == "reject" and d_model % 2):
            SinusoidalKey(d_model, preset=self.preset)  # says which rule it breaks
        chosen_base, arrangement, params = presets.resolve(preset, given, layout, d_model)
        rounding = self.rounding if preset.library is not None else "exact"
        return SinusoidalKey(
            d_model, chosen_base, arrangement, dtype, self.preset, rounding, params
        )

    def preset_fields(self, key: SinusoidalKey) -> dict[str, Any]:
        """The preset, rounding and parameters an answer states (none for vaswani, whose
        answers are as they were before presets)."""
        if self.preset == "vaswani":
            return {"base": key.base}
        preset = PRESETS[self.preset]
        named = {param.name for param in preset.params}
        return {
            "preset": self.preset,
            "rounding": self.rounding,
            **({"base": key.base} if "base" in named else {}),
            **dict(key.params),
        }

"""The presets on the wire: which convention's table a request asks for (shared by the
tables, the pictures and apply), and the ``GET /v1/presets`` document."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.encodings import presets
from service.encodings.registry import DType, Rounding
from service.encodings.sinusoidal import SinusoidalKey, preset_key
from service.settings import POSITION_CEILING

# |scale| of an mlx table at most this (and at most what its dtype holds)
SCALE_LIMIT: Final = 1e30

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
        None,
        ge=1e-30,
        le=presets.MAX_FREQUENCY,
        description="tensor2tensor: default 1. It is the largest frequency (with "
        "min_timescale^2 / max_timescale): at most 16 radians a position.",
    )
    max_timescale: float | None = Field(
        None, ge=1e-30, le=1e30, description="tensor2tensor: default 10000."
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
    max_wavelength: float | None = Field(None, gt=1, le=1e30, description="keras: default 10000.")
    min_freq: float | None = Field(
        None, ge=1e-30, le=presets.MAX_FREQUENCY, description="mlx: 0.0001. At most 16."
    )
    max_freq: float | None = Field(
        None,
        ge=1e-30,
        le=presets.MAX_FREQUENCY,
        description="mlx: 1. At most 16, or 16 / (2 pi) with full_turns (the largest "
        "frequency is at most 16 radians a position).",
    )
    cos_first: bool | None = Field(None, description="mlx: cosines first; default false.")
    full_turns: bool | None = Field(None, description="mlx: frequencies times 2 pi; false.")

    def given(self) -> dict[str, Any]:
        """The presets' parameters as given (``None``: not given)."""
        return {name: getattr(self, name) for name in PRESET_PARAMETERS}

    def preset_key(self, d_model: int, dtype: DType, **more: Any) -> SinusoidalKey:
        """The key of this preset's table of width ``d_model``: ``base`` and ``layout``
        (fields of the models that use this one) count where the client gave them."""
        chosen = self.model_fields_set
        base = getattr(self, "base", None) if "base" in chosen else None
        layout = getattr(self, "layout", None) if "layout" in chosen else None
        given = {**self.given(), "base": base, **more}
        return preset_key(d_model, dtype, self.preset, self.rounding, given, layout)

    def preset_fields(self, key: SinusoidalKey) -> dict[str, Any]:
        """The preset, rounding and parameters an answer states: the key's own query
        without its width, dtype and layout (vaswani: its base only, as before presets)."""
        fields = key.query().items()
        return {k: v for k, v in fields if k not in ("d_model", "dtype", "layout")}


class PresetSource(BaseModel):
    """A library function a preset follows."""

    repository: str
    path: str
    function: str


class PresetParameter(BaseModel):
    """A preset's own parameter, by the library's name for it."""

    name: str
    default: float | int | bool | None = Field(description="null: computed from d_model.")
    description: str
    minimum: float | None = Field(None, description="The least value served (inclusive).")
    exclusive_minimum: float | None = Field(None, description="Values must be above it.")
    maximum: float | None = Field(None, description="The greatest value served (inclusive).")


class PresetDocument(BaseModel):
    """One preset: whose table it is, how it is computed, and how it is used."""

    name: str
    summary: str
    follows: list[PresetSource]
    models: str = Field(description="The models and libraries that use this table.")
    formula: str
    layout: str | None = Field(
        description="The arrangement of columns it fixes; null: the client's layout "
        "(interleaved or split)."
    )
    odd_d_model: str = Field(description="What an odd d_model gives.")
    min_d_model: int
    parameters: list[PresetParameter]
    positions: str = Field(description="Which position each row of the table is.")
    library_rounding: str = Field(description="What rounding=library computes in.")
    embedding_scale: str = Field(description="apply's default scale on the embeddings.")
    first_row: str = Field(description="apply's default offset.")
    constraints: list[str] = Field(
        description="Rules between parameters, beside each one's range: where rounding=exact "
        "keeps its promise, and the dtype holds the table."
    )


class PresetsDocument(BaseModel):
    """Every preset."""

    presets: list[PresetDocument]


_ODD: Final = {
    "sin": "the last column is a sine",
    "zero": "the last column is zeros",
    "reject": "refused (422): the library has no odd widths",
}
_ROUNDING: Final = {
    "tf-tutorial": "float64, rounded to float32 once at the end",
    "marian": "float64, rounded to float32 once at the end",
}


def document(preset: presets.Preset) -> PresetDocument:
    """What ``GET /v1/presets`` says of ``preset``."""
    library = (
        "the same as exact: the library computes in float64 and rounds once"
        if preset.library is None
        else _ROUNDING.get(preset.name, "float32, in the library's order of operations")
    )
    return PresetDocument(
        name=preset.name,
        summary=preset.summary,
        follows=[PresetSource(**vars_of(source)) for source in preset.sources],
        models=preset.models,
        formula=preset.formula,
        layout=preset.arrangement,
        odd_d_model=_ODD[preset.odd],
        min_d_model=preset.min_d,
        parameters=[
            PresetParameter(
                name=p.name, default=p.default, description=p.description, **_range(p.name)
            )
            for p in preset.params
        ],
        positions=preset.positions,
        library_rounding=library,
        embedding_scale=preset.embed_scale,
        first_row="padding_idx + 1" if preset.zero_row else "0",
        constraints=_CONSTRAINTS.get(preset.name, []),
    )


# The ranges of the parameters that are not PresetFields' (the tables' base and scale).
_OTHER_RANGES: Final[dict[str, dict[str, float]]] = {
    "base": {"exclusive_minimum": 1.0},
    "scale": {"minimum": -SCALE_LIMIT, "maximum": SCALE_LIMIT},
}
_SHIFTED: Final = "start_index + max_len - 1, the last position, is at most PE_MAX_POSITION"
_CONSTRAINTS: Final = {
    "tensor2tensor": [
        "the largest frequency, max(min_timescale, min_timescale^2 / max_timescale), is at "
        "most 16 radians a position",
        _SHIFTED,
    ],
    "keras": [_SHIFTED],
    "mlx": [
        "the largest frequency, max(min_freq, max_freq) (times 2 pi with full_turns), is at "
        "most 16 radians a position",
        "|scale| is at most the dtype's largest number (float16: 65504)",
    ],
}


def _range(name: str) -> dict[str, float]:
    """A parameter's range as the wire model declares it (``ge``, ``gt``, ``le``)."""
    if name in _OTHER_RANGES:
        return _OTHER_RANGES[name]
    found: dict[str, float] = {}
    for rule in PresetFields.model_fields[name].metadata:
        for attribute, key in (("ge", "minimum"), ("gt", "exclusive_minimum"), ("le", "maximum")):
            value = getattr(rule, attribute, None)
            if value is not None:
                found[key] = float(value)
    return found


def vars_of(source: presets.Source) -> dict[str, str]:
    return {"repository": source.repository, "path": source.path, "function": source.function}

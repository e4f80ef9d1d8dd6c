"""The presets on the wire: which convention's table a request asks for (shared by the
tables, the pictures and apply), and the ``GET /v1/presets`` document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from service.encodings import parameters, presets
from service.encodings.catalogue import PARAMETERS, PRESETS, taking
from service.encodings.registry import DType, Listed, Rounding
from service.encodings.sinusoidal import SinusoidalKey, preset_key
from service.schemas.vectors import Vector, vectors

SCALE_LIMIT: Final = parameters.SCALE_LIMIT

# The names and parameters are the catalogue's, so the models are made when this module is
# imported. mypy cannot read a Literal or fields made at run time: under TYPE_CHECKING it
# sees a name as a str and the hand-written base classes (code reads the parameters by
# name, through given()); at run time pydantic sees the Literal and the made models, so
# validation errors and the OpenAPI document name each preset and range.
if TYPE_CHECKING:
    PresetName = str
else:
    PresetName = Literal[tuple(PRESETS)]
# the presets' own parameters with query fields, each taken by the presets that list it
PRESET_PARAMETERS: Final = tuple(name for name, p in PARAMETERS.items() if p.query is not None)


def parameter_fields(names: tuple[str, ...], *, query: bool) -> dict[str, Any]:
    """``create_model``'s definitions of the parameters ``names``, each optional (``None``:
    not given): with ``query``, the range and the description of a query field."""
    fields: dict[str, Any] = {}
    for name in names:
        param = PARAMETERS[name]
        if not query:
            fields[name] = (param.kind | None, None)
            continue
        description = f"{', '.join(taking(name))}: {param.query}"
        fields[name] = (
            param.kind | None,
            Field(None, ge=param.ge, gt=param.gt, le=param.le, description=description),
        )
    return fields


# a preset's name, and each of its aliases (lower case) -> the preset
NAMES: Final = {
    alias: preset.name for preset in PRESETS.values() for alias in (preset.name, *preset.aliases)
}


class _PresetFields(BaseModel):
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

    @field_validator("preset", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        """A preset's name in any case, or a model's that uses it (``NLLB``: fairseq)."""
        return NAMES.get(value.strip().lower(), value) if isinstance(value, str) else value

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


if TYPE_CHECKING:
    PresetFields = _PresetFields
else:
    PresetFields = create_model(
        "PresetFields",
        __base__=_PresetFields,
        __module__=__name__,
        __doc__=_PresetFields.__doc__,
        **parameter_fields(PRESET_PARAMETERS, query=True),
    )


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
    aliases: list[str] = Field(
        description="Other names preset= takes for it (any case, as its name): models that use "
        "this table and no other preset's."
    )
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
    test_vectors: list[Vector] = Field(
        description="For each rounding, a small table's SHA-256 and entries far out: what a "
        "port to another language checks itself against."
    )


class FamilySource(BaseModel):
    """The code a family's preset follows, at a version."""

    repository: str
    version: str = Field(description="A release, or the commit of an unpackaged repository.")
    path: str
    function: str


class FamilyPreset(BaseModel):
    """One preset of a family other than sinusoidal: what it is, the code it follows, the
    parameters it fixes and those a client may still give."""

    name: str
    summary: str
    follows: list[FamilySource]
    fixes: dict[str, float | int | bool | str | list[int] | None] = Field(
        description="The parameters it sets (others keep the family's defaults)."
    )
    takes: list[str] = Field(description="The parameters a client may give with it.")
    library_rounding: str = Field(description="What rounding=library computes in.")
    rows: str = Field(description="What each row of its table is.")


class PresetsDocument(BaseModel):
    """Every preset: the sinusoidal family's, and each other family's by its name."""

    presets: list[PresetDocument]
    families: dict[str, list[FamilyPreset]] = Field(
        description="The presets of the other families (preset= of their GET), by family."
    )


def listed(preset: Listed) -> FamilyPreset:
    """What ``GET /v1/presets`` says of another family's ``preset``."""
    return FamilyPreset(
        name=preset.name,
        summary=preset.description,
        follows=[
            FamilySource(
                repository=source.repository,
                version=source.version,
                path=source.path,
                function=source.function,
            )
            for source in preset.sources
        ],
        fixes=dict(preset.settings),
        takes=list(preset.takes),
        library_rounding=_ROUNDING.get(preset.arithmetic, preset.arithmetic),
        rows=preset.rows,
    )


_ODD: Final = {
    "sin": "the last column is a sine",
    "zero": "the last column is zeros",
    "reject": "refused (422): the library has no odd widths",
}
_ROUNDING: Final = {
    "float32": "float32, in the library's order of operations",
    "float64": "float64, rounded to float32 once at the end",
}


def document(preset: presets.Preset) -> PresetDocument:
    """What ``GET /v1/presets`` says of ``preset``."""
    library = (
        "the same as exact: the library computes in float64 and rounds once"
        if preset.library is None
        else _ROUNDING[preset.computes_in]
    )
    return PresetDocument(
        name=preset.name,
        summary=preset.summary,
        follows=[PresetSource(**vars_of(source)) for source in preset.sources],
        models=preset.models,
        aliases=list(preset.aliases),
        formula=preset.formula,
        layout=preset.arrangement,
        odd_d_model=_ODD[preset.odd],
        min_d_model=preset.min_d,
        parameters=[
            PresetParameter(name=p.name, default=p.default, description=p.description, **_range(p))
            for p in preset.params
        ],
        positions=preset.positions,
        library_rounding=library,
        embedding_scale=preset.embed_scale,
        first_row=f"{preset.zero_row} + 1" if preset.zero_row else "0",
        test_vectors=list(vectors(preset.name)),
        constraints=_constraints(preset),
    )


def _constraints(preset: presets.Preset) -> list[str]:
    """The rules between ``preset``'s parameters, beside each one's range."""
    rules = []
    if preset.frequency_formula:
        rules.append(
            f"the largest frequency, {preset.frequency_formula}, is at most "
            f"{presets.MAX_FREQUENCY:g} radians a position"
        )
    if preset.shift:
        rules.append(f"{preset.shift} + max_len - 1, the last position, is at most PE_MAX_POSITION")
    if preset.scale:
        rules.append(f"|{preset.scale}| is at most the dtype's largest number (float16: 65504)")
    return rules


def _range(param: presets.Param) -> dict[str, float]:
    """A parameter's range as ``GET /v1/presets`` states it."""
    bounds = {"minimum": param.ge, "exclusive_minimum": param.gt, "maximum": param.le}
    return {key: float(bound) for key, bound in bounds.items() if bound is not None}


def vars_of(source: presets.Source) -> dict[str, str]:
    return {"repository": source.repository, "path": source.path, "function": source.function}

"""The timestep family's parameters on the wire (``GET /v1/encodings/timestep`` and ``POST
.../positions``): diffusers' names, FLUX's ``time_factor``, the timesteps' dtype, and a
preset (:data:`service.encodings.timestep.PRESETS`) that fixes a model's; and the same read
from a diffusers model's ``config.json`` (:data:`CLASSES`, one record a ``_class_name``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import DType, Rounding
from service.encodings.timestep import (
    PARAMETERS,
    PRESETS,
    TimestepDType,
    TimestepKey,
    preset_key,
    reach,
)
from service.errors import InvalidInput
from service.schemas import hf_config
from service.schemas.common import Read, Window
from service.schemas.hf_config import BOOLEAN, INTEGER, NUMBER, NUMBERS, STRING, Reader
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
        f"given), {', '.join(name for name in PRESETS if name != 'diffusers')}; "
        "GET /v1/presets lists them (families.timestep) with the code each follows.",
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
        """The table's key, refused where it cannot take the table's last timestep."""
        given = {name: getattr(self, name) for name in PARAMETERS}
        key = preset_key(self.dim, self.preset, given, self.rounding, self.dtype)
        reach(key, self.max_len)
        return key

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


class TimestepFromConfig(BaseModel):
    """What a diffusers model's config does not say: how many timesteps, which rows, the
    dtype the pipeline runs in, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int | None = Field(
        None,
        ge=1,
        le=POSITION_CEILING + 1,
        description="Integer timesteps 0 .. max_len-1 (the scheduler's num_train_timesteps, "
        "1000 for most).",
    )
    start: int = Field(0, ge=0, description="First timestep returned.")
    stop: int | None = Field(None, ge=1, description="Timestep after the last; default max_len.")
    timestep_dtype: TimestepDType | None = Field(
        None, description="The pipeline's dtype, as the GET's; default the preset's."
    )
    rounding: Rounding = Field("library", description="As for the GET.")
    dtype: DType = Field("float32", description="As for the GET.")
    format: TableFormat | None = Field(None, description="As for the GET.")


# what this reading reads, and what each holds
FIELDS: Final = hf_config.fields(
    {
        "_class_name": STRING,
        "time_embedding_type": STRING,
        "flip_sin_to_cos": BOOLEAN,
        "freq_shift": NUMBER,
        "block_out_channels": NUMBERS,
        **dict.fromkeys(("freq_dim", "num_attention_heads", "attention_head_dim"), INTEGER),
    }
)


def _first_block(default: list[int]) -> Callable[[Reader], int]:
    """A UNet's width: its first block's channels (``default``: the class's)."""

    def width(config: Reader) -> int:
        channels = config.get_or("block_out_channels", default)
        if not channels or not isinstance(channels[0], int):
            raise InvalidInput("block_out_channels", "must be a list of integers")
        return int(channels[0])

    return width


@dataclass(frozen=True, slots=True)
class DiffusersClass:
    """A diffusers 0.42.1 model class's timestep embedding: the preset whose arithmetic it
    runs, its width (from the config), the config fields that give the preset's parameters
    (``(field, parameter, the class's default)``), whether it reads ``time_embedding_type``
    (only ``positional`` is a formula: ``fourier`` and ``learned`` are weights), and where
    it builds its ``Timesteps``."""

    preset: str
    width: Callable[[Reader], int]
    source: str
    reads: tuple[tuple[str, str, Any], ...] = ()
    typed: bool = False


def _constant(dim: int) -> Callable[[Reader], int]:
    return lambda config: dim


_UNET_READS: Final = (
    ("flip_sin_to_cos", "flip_sin_to_cos", True),
    ("freq_shift", "downscale_freq_shift", 0),
)
CLASSES: Final[Mapping[str, DiffusersClass]] = {
    "UNet2DConditionModel": DiffusersClass(
        "diffusers",
        _first_block([320, 640, 1280, 1280]),
        "models/unets/unet_2d_condition.py: Timesteps(block_out_channels[0], "
        "flip_sin_to_cos, freq_shift)",
        _UNET_READS,
        typed=True,
    ),
    "UNet2DModel": DiffusersClass(
        "diffusers",
        _first_block([224, 448, 672, 896]),
        "models/unets/unet_2d.py: Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)",
        _UNET_READS,
        typed=True,
    ),
    "CogVideoXTransformer3DModel": DiffusersClass(
        "diffusers",
        lambda config: (
            config.get_or("num_attention_heads", 30) * config.get_or("attention_head_dim", 64)
        ),
        "models/transformers/cogvideox_transformer_3d.py: Timesteps(inner_dim, "
        "flip_sin_to_cos, freq_shift)",
        _UNET_READS,
    ),
    "WanTransformer3DModel": DiffusersClass(
        "unet",
        lambda config: config.get_or("freq_dim", 256),
        "models/transformers/transformer_wan.py: Timesteps(freq_dim, True, 0)",
    ),
    "FluxTransformer2DModel": DiffusersClass(
        "flux-diffusers",
        _constant(256),
        "models/embeddings.py: CombinedTimestepGuidanceTextProjEmbeddings, Timesteps(256, "
        "True, 0); the pipeline's t / 1000 and the transformer's t * 1000 in its dtype",
    ),
    "SD3Transformer2DModel": DiffusersClass(
        "unet",
        _constant(256),
        "models/embeddings.py: CombinedTimestepTextProjEmbeddings, Timesteps(256, True, 0)",
    ),
    "PixArtTransformer2DModel": DiffusersClass(
        "unet",
        _constant(256),
        "models/embeddings.py: PixArtAlphaCombinedTimestepSizeEmbeddings, Timesteps(256, True, 0)",
    ),
    "HunyuanVideoTransformer3DModel": DiffusersClass(
        "unet",
        _constant(256),
        "models/transformers/transformer_hunyuan_video.py: Timesteps(256, True, 0)",
    ),
    "QwenImageTransformer2DModel": DiffusersClass(
        "qwen-image",
        _constant(256),
        "models/transformers/transformer_qwenimage.py: Timesteps(256, True, 0, scale=1000)",
    ),
    "AuraFlowTransformer2DModel": DiffusersClass(
        "auraflow",
        _constant(256),
        "models/transformers/auraflow_transformer_2d.py: Timesteps(256, True, 0, scale=1000)",
    ),
}


def timestep_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A diffusers model config's timestep embedding: its class's preset, width and
    parameters, and the fields read."""
    top = Reader(config)
    name = top.get("_class_name")
    record = CLASSES.get(name) if name is not None else None
    if record is None:
        said = "is missing" if name is None else f"is {name!r}"
        raise InvalidInput(
            "_class_name",
            f"{said}: the timestep embedding is read from the configs of {', '.join(CLASSES)}",
        )
    if record.typed:
        kind = top.get_or("time_embedding_type", "positional")
        if kind != "positional":
            raise InvalidInput(
                "time_embedding_type",
                f"is {kind!r}: only positional is a formula ({kind} is the model's weights)",
            )
    query: dict[str, Any] = {"preset": record.preset, "dim": record.width(top)}
    for field, parameter, default in record.reads:
        query[parameter] = top.get_or(field, default)
    return Read({"": query}, None, tuple(top.read))

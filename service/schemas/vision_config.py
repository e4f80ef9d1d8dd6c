"""A vision tower's rotary embedding read from a model's ``config.json``
(``POST /v1/encodings/vision-rotary/from-config``): the ``GET``'s parameters (``model``,
``head_dim``, ``theta``, the merge and window sizes) from its ``vision_config`` as transformers
5.23's config classes and rotary modules read it, and its grid in patches from the image's
size in pixels (:func:`vision_rotary_query`). One record a ``model_type`` (:data:`TYPES`):
each vision config class (:class:`Tower`), and each model's config that holds one
(:class:`Holder`).

A published ``vision_config`` holds the fields its model changed and leaves the rest to its
class, and the classes' defaults are not the checkpoints': ``Qwen2_5_VLVisionConfig`` is
3584 wide (a head of 224) where Qwen2.5-VL-7B's tower is 1280 (80), ``Llama4VisionConfig``
768 wide at 448 pixels where Llama 4 Scout's is 1408 at 336. Each default taken is said in
the fields read (``vision_config.hidden_size=3584``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import Format
from service.encodings.registry import DType, Rounding
from service.encodings.vision_rotary import Model
from service.errors import InvalidInput, InvalidParameter
from service.schemas import hf_config
from service.schemas.common import Read
from service.schemas.hf_config import INTEGER, NUMBER, STRING, Reader
from service.schemas.hf_models import ModelType
from service.schemas.hf_rope import rope_of


class VisionRotaryFromConfig(BaseModel):
    """What a model's config does not say: the image's (or video's) size in pixels, which
    rows, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    height: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="The image's height in pixels, as the model gets it (Qwen-VL: after its "
        "processor's resize, a multiple of patch_size × spatial_merge_size). Not for Llama 4, "
        "whose every tile is image_size square.",
    )
    width: int | None = Field(
        None, ge=1, le=1 << 20, description="The image's width in pixels, as height."
    )
    frames: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="A video's frames (Qwen-VL: temporal_patch_size frames a row of the grid, "
        "the last repeated to fill one); default 1.",
    )
    window_index: bool | None = Field(None, description="As for the GET (qwen2_5_vl).")
    start: int = Field(0, ge=0, description="As for the GET.")
    stop: int | None = Field(None, ge=1, description="As for the GET.")
    rounding: Rounding = Field("library", description="As for the GET.")
    dtype: DType = Field("float32", description="As for the GET.")
    format: Format | None = Field(None, description="As for the GET.")


# the request's parameters that say how to read the config: the grid's size, not the GET's
SIZE: Final = ("height", "width", "frames")
# what this reading reads, and what each holds (transformers' classes also take a list for
# patch_size and image_size; the rotary modules of Qwen-VL and Llama 4 divide by an integer)
FIELDS: Final = hf_config.fields(
    {
        "model_type": STRING,
        "rope_theta": NUMBER,
        **dict.fromkeys(
            (
                "hidden_size",
                "embed_dim",
                "num_attention_heads",
                "head_dim",
                "patch_size",
                "image_size",
                "spatial_merge_size",
                "temporal_patch_size",
                "window_size",
            ),
            INTEGER,
        ),
    }
)
# RotaryEmbeddingConfigMixin.default_theta (modeling_rope_utils.py)
_THETA: Final = 10_000.0


def _strict(source: str, defaults: Mapping[str, Any], **names: str) -> ModelType:
    """A vision config class: its file and class, its defaults of the fields read, its
    ``attribute_map``. Its fields are typed (``@strict``): transformers refuses a null."""
    why = "transformers' config class refuses it (a strict field): leave it out for its default"
    return ModelType(source, defaults, names, unset=dict.fromkeys(defaults, why))


def _positive(config: Reader, name: str) -> int:
    """The integer field ``name`` (its class's default where the config leaves it out), at
    least 1, else refused naming it as the config spells it."""
    value = config.get(name)
    if value is None or value < 1:
        own = name if config.known is None else config.known.names.get(name, name)
        raise InvalidInput(config.path + own, "must be a positive integer")
    return int(value)


def _pixels(asked: Mapping[str, Any], name: str) -> int:
    value = asked.get(name)
    if value is None:
        raise InvalidParameter(name, "give the image's height and width in pixels")
    return int(value)


def _one_frame(asked: Mapping[str, Any]) -> None:
    """Towers of images only (Pixtral, Llama 4, DINOv3) take no frames."""
    if int(asked.get("frames") or 1) != 1:
        raise InvalidParameter("frames", "this vision tower reads images: one frame")


def _merged(vision: Reader, asked: Mapping[str, Any]) -> tuple[int, ...]:
    """Qwen-VL's grid ``(t, h, w)``: the processor resizes an image to multiples of
    ``patch_size × spatial_merge_size`` pixels (``smart_resize``'s factor,
    ``models/qwen2_vl/image_processing_qwen2_vl.py``), cuts it into patches, and fills a
    video's last temporal patch with its last frame (``video_processing_qwen2_vl.py``:
    ``-num_frames % temporal_patch_size`` repeats); an image is one temporal patch."""
    patch = _positive(vision, "patch_size")
    merge = _positive(vision, "spatial_merge_size")
    frames = int(asked.get("frames") or 1)
    side: list[int] = []
    for name in ("height", "width"):
        pixels = _pixels(asked, name)
        if pixels % (patch * merge):
            raise InvalidParameter(
                name,
                f"is {pixels} pixels, not a multiple of patch_size × spatial_merge_size "
                f"({patch} × {merge}): the model's processor resizes images to such sizes, and "
                f"its grid must be a multiple of spatial_merge_size {merge}",
            )
        side.append(pixels // patch)
    return (-(-frames // _positive(vision, "temporal_patch_size")), *side)


def _patched(vision: Reader, asked: Mapping[str, Any]) -> tuple[int, ...]:
    """Pixtral's and DINOv3's grid ``(h, w)``: whole patches, the rest cut off
    (``PixtralVisionModel.forward``: ``image_sizes // patch_size``;
    ``DINOv3ViTRopePositionEmbedding.forward``: ``height // patch_height``)."""
    _one_frame(asked)
    patch = _positive(vision, "patch_size")
    grid = tuple(_pixels(asked, name) // patch for name in ("height", "width"))
    if not all(grid):
        raise InvalidParameter(
            "height",
            f"makes an empty grid {grid}: the image is smaller than a patch ({patch} pixels)",
            also=("width",),
        )
    return grid


def _tile(vision: Reader, asked: Mapping[str, Any]) -> tuple[int, ...]:
    """Llama 4's grid: the config's, ``image_size // patch_size`` square
    (``Llama4VisionRotaryEmbedding._compute_freqs_ci``). The processor cuts an image into
    tiles of ``image_size`` and the tower turns every tile by this one table: a size asked
    is refused unless it is the tile's."""
    _one_frame(asked)
    size = _positive(vision, "image_size")
    for name in ("height", "width"):
        pixels = asked.get(name)
        if pixels is not None and pixels != size:
            raise InvalidParameter(
                name,
                f"is {pixels} pixels: Llama 4 turns every {size}×{size} tile of an image "
                f"(its config's image_size) by the same table; leave height and width out",
            )
    side = size // _positive(vision, "patch_size")
    if not side:
        raise InvalidInput(f"{vision.path}image_size", f"is {size}, smaller than a patch")
    return side, side


def _axial(vision: Reader) -> float:
    """Theta as ``RotaryEmbeddingConfigMixin`` standardizes it (``rope_parameters``, else
    ``rope_scaling``, ``rope_theta``; default 10000.0), for a rotary module that refuses a
    ``rope_type`` but ``axial`` (the class's ``default_rope_type``, which ``default``
    becomes): Qwen-VL's and Pixtral's ``compute_axial_rope_parameters``."""
    rope = rope_of(vision)
    kind = rope.get("rope_type") or rope.get("type") or "default"
    if kind not in ("default", "axial"):
        raise InvalidInput(
            f"{rope.path}rope_type",
            f"is {kind!r}: the vision tower's rotary embedding takes only axial "
            "(transformers' module raises for any other)",
        )
    return _theta(vision, rope)


def _default(vision: Reader) -> float:
    """Theta as ``_axial`` reads it, whatever the ``rope_type``: Llama 4's vision rotary
    reads ``rope_parameters["rope_theta"]`` only."""
    return _theta(vision, rope_of(vision))


def _theta(vision: Reader, rope: Reader) -> float:
    for where in (rope, vision):
        if where.get("rope_theta") is not None:
            return _positive_number(where, "rope_theta")
    return float(vision.get_or("rope_theta", _THETA))


def _own(vision: Reader) -> float:
    """DINOv3's ``rope_theta``, a field of its class (default 100.0), which
    ``DINOv3ViTRopePositionEmbedding`` reads; its ``rope_parameters`` are not read."""
    return _positive_number(vision, "rope_theta")


def _positive_number(config: Reader, name: str) -> float:
    value = config.get(name)
    if value is None or value <= 0:
        raise InvalidInput(config.path + name, "must be a positive number")
    return float(value)


@dataclass(frozen=True, slots=True)
class Tower:
    """A vision config class of transformers 5.23 as its rotary module reads it: ``model``,
    the ``GET``'s; ``rotary``, the module (file, class); ``config``, the class (its file,
    its defaults of the fields read, its ``attribute_map``).

    The head is ``width // num_attention_heads`` (as the tower's attention makes it);
    ``head_dim``: the rotary module reads a config's ``head_dim`` first (``getattr(config,
    "head_dim", None) or ...``), which must then be the attention's head (else the model
    fails where it applies it). ``theta``: how it reads theta. ``grid``: the grid in
    patches of the image asked for. ``reads``: the fields given as the ``GET``'s
    parameters of the same names (Qwen-VL's merge, Qwen2.5-VL's window)."""

    model: Model
    rotary: str
    config: ModelType
    theta: Callable[[Reader], float]
    grid: Callable[[Reader, Mapping[str, Any]], tuple[int, ...]]
    width: str = "hidden_size"
    head_dim: bool = False
    reads: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Holder:
    """A model's config holding its vision tower's in ``vision_config``: the class
    ``tower`` names (its ``sub_configs_defaults``), or, with ``auto``, the class the
    ``vision_config``'s own ``model_type`` names (``AutoConfig``), ``tower`` where it names
    none. A ``vision_config`` given is read with its class's defaults; one left out is the
    class's defaults updated by ``absent`` (the spec's ``init_kwargs``, which only a
    missing ``vision_config`` gets: ``SubConfigSpec.create_subconfig``)."""

    source: str
    tower: str
    auto: bool = False
    absent: Mapping[str, Any] = field(default_factory=dict)


_MODELING: Final = "models/{0}/modeling_{0}.py, {1}"
_QWEN_HEADS: Final = {"num_attention_heads": "num_heads"}
_QWEN25: Final = {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
# Qwen3-VL's differ from Qwen2.5-VL's in width and patch only
_QWEN3: Final = {**_QWEN25, "hidden_size": 1152, "num_heads": 16, "patch_size": 16}

TYPES: Final[Mapping[str, Tower | Holder]] = {
    # the vision config classes, by their model_type
    "qwen2_vl_vision": Tower(
        "qwen2_vl",
        _MODELING.format("qwen2_vl", "Qwen2VLVisionRotaryEmbedding"),
        # its hidden_size (3584) is the merger's output, not the attention's width
        _strict(
            "models/qwen2_vl/configuration_qwen2_vl.py, Qwen2VLVisionConfig",
            {"embed_dim": 1280, "num_heads": 16, **_QWEN25},
            **_QWEN_HEADS,
        ),
        _axial,
        _merged,
        width="embed_dim",
        head_dim=True,
        reads=("spatial_merge_size",),
    ),
    "qwen2_5_vl_vision": Tower(
        "qwen2_5_vl",
        _MODELING.format("qwen2_5_vl", "Qwen2_5_VLVisionRotaryEmbedding"),
        # 3584 wide by default (a head of 224): Qwen2.5-VL-7B's tower is 1280 (80)
        _strict(
            "models/qwen2_5_vl/configuration_qwen2_5_vl.py, Qwen2_5_VLVisionConfig",
            {"hidden_size": 3584, "num_heads": 16, **_QWEN25, "window_size": 112},
            **_QWEN_HEADS,
        ),
        _axial,
        _merged,
        head_dim=True,
        # get_vision_window_index(grid, spatial_merge_size, window_size, patch_size)
        reads=("spatial_merge_size", "window_size", "patch_size"),
    ),
    "qwen3_vl_vision": Tower(
        "qwen3_vl",
        _MODELING.format("qwen3_vl", "Qwen3VLVisionRotaryEmbedding"),
        _strict(
            "models/qwen3_vl/configuration_qwen3_vl.py, Qwen3VLVisionConfig",
            _QWEN3,
            **_QWEN_HEADS,
        ),
        _axial,
        _merged,
        head_dim=True,
        reads=("spatial_merge_size",),
    ),
    "qwen3_vl_moe_vision": Tower(
        "qwen3_vl",
        _MODELING.format("qwen3_vl_moe", "Qwen3VLMoeVisionRotaryEmbedding"),
        _strict(
            "models/qwen3_vl_moe/configuration_qwen3_vl_moe.py, Qwen3VLMoeVisionConfig",
            _QWEN3,
            **_QWEN_HEADS,
        ),
        _axial,
        _merged,
        head_dim=True,
        reads=("spatial_merge_size",),
    ),
    "pixtral": Tower(
        "pixtral",
        _MODELING.format("pixtral", "PixtralVisionRotaryEmbedding"),
        # __post_init__ sets head_dim = hidden_size // num_attention_heads before the
        # config's own fields, so a head_dim given is the one its rotary reads
        _strict(
            "models/pixtral/configuration_pixtral.py, PixtralVisionConfig",
            {"hidden_size": 1024, "num_attention_heads": 16, "patch_size": 16},
        ),
        _axial,
        _patched,
        head_dim=True,
    ),
    "llama4_vision_model": Tower(
        "llama4",
        # freq_dim = hidden_size // num_attention_heads // 2: no head_dim read
        _MODELING.format("llama4", "Llama4VisionRotaryEmbedding"),
        # 768 wide at 448 pixels by default: Llama 4 Scout's tower is 1408 at 336
        _strict(
            "models/llama4/configuration_llama4.py, Llama4VisionConfig",
            {"hidden_size": 768, "num_attention_heads": 16, "image_size": 448, "patch_size": 14},
        ),
        _default,
        _tile,
    ),
    "dinov3_vit": Tower(
        "dinov3",
        # the table holds the patches only: its prefix tokens (the class token, and
        # num_register_tokens, 0 by default where the checkpoints have 4) are not turned
        "models/dinov3_vit/modeling_dinov3_vit.py, DINOv3ViTRopePositionEmbedding",
        _strict(
            "models/dinov3_vit/configuration_dinov3_vit.py, DINOv3ViTConfig",
            {"hidden_size": 384, "num_attention_heads": 6, "patch_size": 16, "rope_theta": 100.0},
        ),
        _own,
        _patched,
    ),
    # the models' configs, by theirs
    "qwen2_vl": Holder(
        "models/qwen2_vl/configuration_qwen2_vl.py, Qwen2VLConfig", "qwen2_vl_vision"
    ),
    "qwen2_5_vl": Holder(
        "models/qwen2_5_vl/configuration_qwen2_5_vl.py, Qwen2_5_VLConfig", "qwen2_5_vl_vision"
    ),
    "qwen3_vl": Holder(
        "models/qwen3_vl/configuration_qwen3_vl.py, Qwen3VLConfig", "qwen3_vl_vision"
    ),
    "qwen3_vl_moe": Holder(
        "models/qwen3_vl_moe/configuration_qwen3_vl_moe.py, Qwen3VLMoeConfig",
        "qwen3_vl_moe_vision",
    ),
    "llama4": Holder("models/llama4/configuration_llama4.py, Llama4Config", "llama4_vision_model"),
    # LLaVA's tower is CLIP's by default (learned positions, no rotary); Pixtral-12B's
    # config is a LlavaConfig whose vision_config is a pixtral one
    "llava": Holder("models/llava/configuration_llava.py, LlavaConfig", "clip_vision_model", True),
    "mistral3": Holder(
        "models/mistral3/configuration_mistral3.py, Mistral3Config",
        "pixtral",
        True,
        {
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "head_dim": 64,
            "patch_size": 14,
            "image_size": 1540,
        },
    ),
}
_TOWERS: Final = ", ".join(name for name, kind in TYPES.items() if isinstance(kind, Tower))


def _tower(top: Reader) -> tuple[Tower, Reader]:
    """The vision tower's record and its config as read: the posted config itself where it
    is a vision config, else its ``vision_config``."""
    kind = top.get("model_type")
    record = TYPES.get(kind) if kind is not None else None
    if record is None:
        said = "is missing" if kind is None else f"is {kind!r}"
        raise InvalidInput(
            "model_type",
            f"{said}: a vision tower's rotary embedding is read from the configs of "
            f"{', '.join(TYPES)} (timm's models, as EVA-02, are built by function, "
            "with no config.json: give the GET's parameters)",
        )
    if isinstance(record, Tower):
        return record, top.of_class(record.config)
    vision = top.object("vision_config")
    name, absent = record.tower, None
    if vision is None:
        absent = record.absent
        vision = top.within({}, "vision_config")
    elif record.auto:
        own = vision.get("model_type")
        name = name if own is None else own
    tower = TYPES.get(name)
    if not isinstance(tower, Tower):
        said = f"is {name!r}" if absent is None else f"is left out: the model's default is {name!r}"
        raise InvalidInput(
            f"{vision.path}model_type" if absent is None else "vision_config",
            f"{said}, a tower with no rotary embedding (the vision configs read are {_TOWERS})",
        )
    known = tower.config
    if absent:
        known = ModelType(
            known.source, {**known.defaults, **absent}, known.names, unset=known.unset
        )
    return tower, vision.of_class(known)


def _head_dim(vision: Reader, tower: Tower) -> int:
    """The head's width, as the tower's attention makes it; a ``head_dim`` the rotary
    module reads first must be that."""
    head = _positive(vision, tower.width) // _positive(vision, "num_attention_heads")
    if not head:
        raise InvalidInput(
            f"{vision.path}{tower.width}", "is narrower than the heads: no head is a dimension wide"
        )
    given = vision.get("head_dim") if tower.head_dim else None
    if given and given != head:
        raise InvalidInput(
            f"{vision.path}head_dim",
            f"is {given}, but the tower's attention heads are {tower.width} / "
            f"num_attention_heads = {head} wide: transformers' rotary embedding, which reads "
            "head_dim, would not fit them",
        )
    return head


def vision_rotary_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """A model's vision tower's rotary embedding over the image asked for (``height``,
    ``width`` in pixels, a video's ``frames``): the ``GET``'s ``model``, ``grid`` (in
    patches), ``head_dim``, ``theta`` and the tower's other parameters, as its ``model_type``'s
    record reads them (:data:`TYPES`), and the fields read."""
    top = Reader(config)
    tower, vision = _tower(top)
    head_dim, theta = _head_dim(vision, tower), tower.theta(vision)
    query: dict[str, Any] = {
        "model": tower.model,
        "grid": ",".join(map(str, tower.grid(vision, asked))),
        "head_dim": head_dim,
        "theta": theta,
    }
    for name in tower.reads:
        query[name] = _positive(vision, name)
    return Read({"": query}, None, tuple(top.read))

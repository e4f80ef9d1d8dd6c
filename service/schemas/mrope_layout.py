"""The body of ``POST /v1/positions/mrope``: a sequence's layout (text runs, image and video
grids in patches) and the vision settings, given or read from a model's ``config.json``
(``model_type``; ``vision_config.spatial_merge_size`` and, Qwen2.5-VL's,
``vision_config.tokens_per_second``), checked as the real models need their inputs."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.encodings.mrope_positions import Model, Run
from service.errors import InvalidInput
from service.schemas.hf_models import MODELS

# model_type -> the arithmetic of its get_rope_index, from the model types' records
MODEL_TYPES: Final[dict[str, Model]] = {
    name: model.positions for name, model in MODELS.items() if model.positions is not None
}
MAX_SEGMENTS: Final = 1024
_MAX_GRID: Final = 1 << 16
_DEFAULT_MERGE: Final = 2  # every one of these models' vision configs
Patches = Annotated[int, Field(ge=1, le=_MAX_GRID)]
Grid = tuple[Patches, Patches, Patches]


class Segment(BaseModel):
    """One run of the sequence: ``text`` tokens, or one ``image`` or ``video`` grid."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: int | None = Field(
        None, ge=0, le=1 << 30, description="Text tokens (vision_start and vision_end too)."
    )
    image: Grid | None = Field(None, description="[t, h, w] in patches, as image_grid_thw.")
    video: Grid | None = Field(None, description="[t, h, w] in patches, as video_grid_thw.")
    seconds_per_grid: float | None = Field(
        None,
        gt=0,
        le=1e6,
        allow_inf_nan=False,
        description="Qwen2.5-VL: a video's seconds per temporal grid (second_per_grid_ts); "
        "default 1.",
    )
    frame_text: int | None = Field(
        None,
        ge=0,
        le=1 << 20,
        description="Qwen3-VL and GLM-4V: the text tokens between a video's frames (its "
        "timestamp and vision markers).",
    )

    @model_validator(mode="after")
    def _one_run(self) -> Segment:
        given = [name for name in ("text", "image", "video") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"a segment is one of text, image or video, not {given or 'none'}")
        if self.video is None and (self.seconds_per_grid, self.frame_text) != (None, None):
            raise ValueError("seconds_per_grid and frame_text are a video's")
        return self

    def run(self) -> Run:
        if self.text is not None:
            return Run("text", text=self.text)
        if self.image is not None:
            return Run("image", grid=self.image)
        assert self.video is not None
        seconds = 1.0 if self.seconds_per_grid is None else self.seconds_per_grid
        return Run(
            "video", grid=self.video, seconds_per_grid=seconds, frame_text=self.frame_text or 0
        )


class Layout(BaseModel):
    """A sequence's layout and the vision settings; ``config`` a model's config.json, whose
    settings the body's own override."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    segments: list[Segment] = Field(min_length=1, max_length=MAX_SEGMENTS)
    model: Model | None = Field(
        None,
        description="Whose get_rope_index: qwen2_vl, qwen2_5_vl or qwen3_vl (also GLM-4V); "
        "default the config's model_type, else qwen2_5_vl with tokens_per_second, else qwen2_vl.",
    )
    spatial_merge_size: int | None = Field(None, ge=1, le=64, description="Default 2.")
    tokens_per_second: int | None = Field(
        None, ge=0, le=1 << 20, description="Qwen2.5-VL's; null for Qwen2-VL."
    )
    config: dict[str, Any] | None = Field(None, description="A model's config.json.")

    def settings(self) -> tuple[Model, int, int | None]:
        """The model whose arithmetic, the merge size, tokens per second: the body's, else
        its config's, else the defaults."""
        model, merge, rate = self.model, self.spatial_merge_size, self.tokens_per_second
        if self.config is not None:
            kind = self.config.get("model_type")
            if model is None:
                if not isinstance(kind, str) or kind not in MODEL_TYPES:
                    known = ", ".join(MODEL_TYPES)
                    raise InvalidInput(
                        "config.model_type", f"must be one of {known}, or give model"
                    )
                model = MODEL_TYPES[kind]
            vision = self.config.get("vision_config") or {}
            if not isinstance(vision, dict):
                raise InvalidInput("config.vision_config", "must be an object")
            merge = merge if merge is not None else _integer(vision, "spatial_merge_size")
            rate = rate if rate is not None else _integer(vision, "tokens_per_second")
        if model is None:
            model = "qwen2_vl" if rate is None else "qwen2_5_vl"
        return model, merge or _DEFAULT_MERGE, rate

    def runs(self, model: Model, merge: int, rate: int | None) -> list[Run]:
        """The segments as runs, checked as the model's inputs must be."""
        runs, before = [], "text"
        for index, segment in enumerate(self.segments):
            run = segment.run()
            where = f"segments[{index}].{run.kind}"
            if run.kind != "text":
                if run.kind == before:
                    raise InvalidInput(
                        where,
                        f"follows another {run.kind}: the model's input has text between them "
                        "(a vision_start token at least), else its tokens run together",
                    )
                _, h, w = run.grid
                if h % merge or w % merge:
                    raise InvalidInput(
                        where, f"height and width must be multiples of spatial_merge_size {merge}"
                    )
            if run.kind == "video":
                if model == "qwen2_5_vl" and rate is None:
                    raise InvalidInput("tokens_per_second", "Qwen2.5-VL's videos need it")
                if model == "qwen3_vl" and run.grid[0] > 1 and not run.frame_text:
                    raise InvalidInput(
                        f"segments[{index}].frame_text",
                        "Qwen3-VL's video frames have text between them (timestamp and vision "
                        "markers): give how many tokens",
                    )
            runs.append(run)
            if run.kind != "text" or run.text:  # no text at all does not part two grids
                before = run.kind
        return runs


def _integer(config: dict[str, Any], name: str) -> int | None:
    value = config.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidInput(f"config.vision_config.{name}", "must be a non-negative integer")
    return value


class PositionsDocument(BaseModel):
    """M-RoPE's position ids for a layout, and what made them."""

    model: str
    spatial_merge_size: int
    tokens_per_second: int | None
    length: int = Field(description="L: the sequence's tokens.")
    rope_delta: int = Field(description="max id + 1 - L: the next token's ids are L + rope_delta.")
    position_ids: list[list[int]] = Field(description="(3, L): temporal, height, width.")

"""The parameters of ``GET /v1/positions/vision-interpolation`` (Qwen3-VL's bilinear
indices and weights into its learned position table,
:mod:`service.encodings.vision_interpolation`) and its JSON answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.encodings.vision_interpolation import MAX_SIDE, Grid, check
from service.errors import InvalidParameter
from service.schemas.rope_nd import integers

InterpolationFormat = Literal["json", "npz"]


class VisionInterpolationQuery(BaseModel):
    """Which grid, which table, in what form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid: str = Field(
        max_length=128,
        description="The grid in patches, T,H,W as image_grid_thw gives it (or H,W: T 1); "
        "H and W multiples of spatial_merge_size.",
    )
    num_grid_per_side: int = Field(
        48,
        ge=1,
        le=MAX_SIDE,
        description="The learned table's side: int(num_position_embeddings ** 0.5) "
        "(Qwen3-VL: 2304, so 48).",
    )
    spatial_merge_size: int = Field(
        2,
        ge=1,
        le=MAX_SIDE,
        description="The vision config's merge size: the rows are block-major over its "
        "square blocks (1: row-major).",
    )
    format: InterpolationFormat | None = Field(
        None, description="json or npz (members indices and weights); default by Accept."
    )

    def grid_thw(self) -> Grid:
        """The grid as ``(t, h, w)``, checked with the other parameters."""
        sizes = integers("grid", self.grid, 3) or ()
        if len(sizes) == 2:
            sizes = (1, *sizes)
        if len(sizes) != 3:
            raise InvalidParameter("grid", "must be T,H,W or H,W")
        grid = (sizes[0], sizes[1], sizes[2])
        check(grid, self.num_grid_per_side, self.spatial_merge_size)
        return grid

    def describe(self, grid: Grid) -> dict[str, Any]:
        """The JSON answer's fields before ``shape``, ``indices`` and ``weights``."""
        return {
            "grid": list(grid),
            "num_grid_per_side": self.num_grid_per_side,
            "spatial_merge_size": self.spatial_merge_size,
        }


class VisionInterpolationDocument(BaseModel):
    """The indices and weights as JSON: the parameters as resolved, then a row a patch."""

    grid: list[int] = Field(description="[T, H, W]")
    num_grid_per_side: int
    spatial_merge_size: int
    shape: list[int] = Field(description="[T * H * W, 4]")
    indices: list[list[int]] = Field(
        description="Each patch's four rows of the flattened table, h * side + w: "
        "(h0 w0, h0 w1, h1 w0, h1 w1)."
    )
    weights: list[list[float]] = Field(description="Their float32 bilinear weights.")

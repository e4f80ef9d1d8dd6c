"""Positions of several axes, and not integers: a 2-D grid's table (row ``r`` is the cell
``(r // columns, r % columns)``) and rows at posted ``(2, L)`` coordinates, any finite
numbers, as a vision model's 2-D encodings or a diffusion model's timesteps take them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import Bound, DType, Family, Rows
from service.handlers import Block
from service.web.declared import Declared, Positions


@dataclass(frozen=True, slots=True)
class GridKey:
    pairs: int
    columns: int
    dtype: DType = "float32"

    @property
    def width(self) -> int:
        return 4 * self.pairs


def at(key: GridKey, ids: NDArray[np.float64]) -> Rows:
    """Rows at ``(2, N)`` coordinates ``(y, x)``: sin and cos of ``y / 2^k``, then of ``x``."""
    frequencies = 1 / 2.0 ** np.arange(key.pairs)
    y, x = (axis[:, None] * frequencies for axis in ids)
    return np.concatenate([np.sin(y), np.cos(y), np.sin(x), np.cos(x)], axis=1).astype(key.dtype)


def take(key: GridKey, positions: NDArray[np.int64]) -> Rows:
    return at(key, np.stack([positions // key.columns, positions % key.columns]).astype(float))


def fill(key: GridKey, start: int, out: Sequence[Rows]) -> None:
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part)))
        start += len(part)


class GridQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    height: int = Field(ge=1)
    columns: int = Field(ge=1)
    pairs: int = Field(ge=1)
    dtype: DType = "float32"
    format: TableFormat | None = None

    def key(self) -> GridKey:
        return GridKey(self.pairs, self.columns, self.dtype)


TABLE = Declared(
    family=Family("grid", GridKey, fill, take, bound=lambda key: Bound(1.0, ("pairs",))),
    query=GridQuery,
    key=GridQuery.key,
    block=lambda query, key: Block(
        key, 0, query.height * query.columns, 0, key.width, query.height * query.columns
    ),
    describe=lambda query, key: query.model_dump(exclude={"format"}),
    document=GridQuery,
    summary="A grid.",
    operation_id="getGrid",
    positions=Positions(
        summary="A grid at coordinates.",
        operation_id="getGridAt",
        axes=lambda key: 2,
        integers=False,
        at=at,
    ),
)

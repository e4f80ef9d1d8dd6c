"""A block computed per request, of a shape of its own: ``(rows, key_len)`` of ``|i - j|``
scaled, never kept in the cache (as ALiBi's biases)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import Bound, DType, Family
from service.handlers import Block
from service.web.declared import Declared


@dataclass(frozen=True, slots=True)
class DistanceKey:
    key_len: int
    scale: float = 1.0
    dtype: DType = "float32"

    @property
    def width(self) -> int:
        return self.key_len


def block(key: DistanceKey, start: int, stop: int) -> NDArray[np.floating]:
    rows = np.arange(start, stop)[:, None]
    with np.errstate(over="ignore"):  # the registry's check refuses what overflows
        out: NDArray[np.floating] = (np.abs(rows - np.arange(key.key_len)) * key.scale).astype(
            key.dtype
        )
    return out


class DistanceQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    key_len: int = Field(ge=1)
    scale: float = 1.0
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    format: TableFormat | None = None

    def key(self) -> DistanceKey:
        return DistanceKey(self.key_len, self.scale, self.dtype)


def _bound(key: DistanceKey) -> Bound:
    return Bound(abs(key.scale) * 2.0**31, ("scale",))


TABLE = Declared(
    family=Family(
        "distances",
        DistanceKey,
        block=block,
        shape=lambda key, start, stop: (stop - start, key.key_len),
        bound=_bound,
    ),
    query=DistanceQuery,
    key=DistanceQuery.key,
    block=lambda query, key: Block(key, query.start, query.max_len, 0, key.width, query.max_len),
    describe=lambda query, key: query.model_dump(exclude={"format"}),
    document=DistanceQuery,
    summary="Distances.",
    operation_id="getDistances",
    width_name="key_len",
)

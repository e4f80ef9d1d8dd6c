"""A table cached by rows: row p is p, p + step, p + 2 step, ..."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import DType, Family, Rows
from service.handlers import Block
from service.web.declared import Declared


@dataclass(frozen=True, slots=True)
class RampKey:
    width: int
    step: float = 1.0
    dtype: DType = "float32"


def fill(key: RampKey, start: int, out: Sequence[Rows]) -> None:
    columns = np.arange(key.width) * key.step
    for part in out:
        part[...] = np.arange(start, start + len(part))[:, None] + columns
        start += len(part)


def take(key: RampKey, positions: NDArray[np.int64]) -> Rows:
    out = np.empty((len(positions), key.width), dtype=key.dtype)
    out[...] = positions[:, None] + np.arange(key.width) * key.step
    return out


class RampQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    width: int = Field(ge=1)
    step: float = 1.0
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    stop: int | None = None
    dim_start: int = Field(0, ge=0)
    dim_stop: int | None = None
    format: TableFormat | None = None

    def key(self) -> RampKey:
        return RampKey(self.width, self.step, self.dtype)

    def block(self, key: RampKey) -> Block:
        stop, columns = self.stop or self.max_len, self.dim_stop or self.width
        return Block(key, self.start, stop, self.dim_start, columns, self.max_len)


TABLE = Declared(
    family=Family("ramp", RampKey, fill, take),
    query=RampQuery,
    key=RampQuery.key,
    block=RampQuery.block,
    describe=lambda query, key: query.model_dump(),
    document=RampQuery,
    summary="A ramp.",
    operation_id="getRamp",
)

"""Several named arrays per row: row p holds ``cos`` and ``sin`` of ``p / 2^k``, side by
side (as rotary's tables do), and rows at posted integer positions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import Format
from service.encodings.registry import DType, Family, Rows
from service.handlers import Block
from service.web.declared import Declared, Positions


@dataclass(frozen=True, slots=True)
class PhaseKey:
    pairs: int
    dtype: DType = "float32"

    @property
    def width(self) -> int:
        return 2 * self.pairs


def take(key: PhaseKey, positions: NDArray[np.int64]) -> Rows:
    angles = positions[:, None] / 2.0 ** np.arange(key.pairs)
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(key.dtype)


def fill(key: PhaseKey, start: int, out: Sequence[Rows]) -> None:
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part)))
        start += len(part)


class PhaseQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    pairs: int = Field(ge=1)
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    format: Format | None = None

    def key(self) -> PhaseKey:
        return PhaseKey(self.pairs, self.dtype)


TABLE = Declared(
    family=Family("phases", PhaseKey, fill, take, arrays=("cos", "sin")),
    query=PhaseQuery,
    key=PhaseQuery.key,
    block=lambda query, key: Block(key, query.start, query.max_len, 0, key.width, query.max_len),
    describe=lambda query, key: query.model_dump(exclude={"format"}),
    document=PhaseQuery,
    summary="Phases.",
    operation_id="getPhases",
    positions=Positions(summary="Phases at positions.", operation_id="getPhasesAt"),
)

"""A family the precision audit serves: row p holds ``sin(p / 2^k)``, the library's in
float32 arithmetic, the exact one in float64, rounded once; its audit record
(:class:`service.encodings.registry.Audit`) adds a path of its own, and its one preset is
listed by ``GET /v1/presets``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import (
    Audit,
    AuditPath,
    DType,
    Family,
    Rounding,
    Rows,
    Source,
    Values,
    replacing,
)
from service.handlers import Block
from service.web.declared import Declared


@dataclass(frozen=True, slots=True)
class WaveKey:
    width: int
    rounding: Rounding = "library"
    dtype: DType = "float32"


def take(key: WaveKey, positions: NDArray[np.int64]) -> Rows:
    scales = 2.0 ** np.arange(key.width)
    if key.rounding == "library":
        angles = positions.astype(np.float32)[:, None] / scales.astype(np.float32)
        return np.sin(angles).astype(key.dtype)
    return np.sin(positions[:, None] / scales).astype(key.dtype)


def fill(key: WaveKey, start: int, out: Sequence[Rows]) -> None:
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part)))
        start += len(part)


def _even(key: WaveKey, positions: NDArray[np.int64]) -> Values:
    """The library's rows at the even position below each."""
    library = WaveKey(key.width, "library", "float32")
    return take(library, positions - positions % 2).astype(np.float64)


EVEN = AuditPath("even-positions", "Each position rounded down to an even one.", _even)
AUDIT = Audit(
    exact=replacing(rounding="exact", dtype="float64"),
    library=replacing(rounding="library", dtype="float32"),
    paths=("library", "bf16-table", "float32-positions"),
    own=(EVEN,),
)


@dataclass(frozen=True, slots=True)
class WavePreset:
    name: str = "halving"
    description: str = "Each column half the frequency of the one before."
    sources: tuple[Source, ...] = (Source("example/waves", "1.0", "waves.py", "wave"),)
    settings: Mapping[str, Any] = field(default_factory=lambda: {"width": 4})
    takes: tuple[str, ...] = ()
    arithmetic: str = "float32"
    rows: str = "row p is position p"


class WaveQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    width: int = Field(ge=1, le=64)
    rounding: Rounding = "library"
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    format: TableFormat | None = None

    def key(self) -> WaveKey:
        return WaveKey(self.width, self.rounding, self.dtype)


TABLE = Declared(
    family=Family("waves", WaveKey, fill, take, audit=AUDIT, presets={"halving": WavePreset()}),
    query=WaveQuery,
    key=WaveQuery.key,
    block=lambda query, key: Block(key, query.start, query.max_len, 0, key.width, query.max_len),
    describe=lambda query, key: query.model_dump(exclude={"format"}),
    document=WaveQuery,
    summary="Waves.",
    operation_id="getWaves",
    audit=True,
)

"""Test vectors: for each preset and rounding, the SHA-256 of a small reference table's
bytes and a few entries far out, so that a port to another language (or a copy of a table
made elsewhere) can check itself without this service. ``GET /v1/presets`` lists them."""

from __future__ import annotations

import functools
import hashlib
from typing import Final

import numpy as np
from pydantic import BaseModel, Field

from service.encodings import kernels, registry
from service.encodings.catalogue import PRESETS
from service.encodings.registry import ROUNDINGS, Rounding
from service.encodings.sinusoidal import preset_key

# the reference table: max_len x d_model float32 (d_model the preset's least if larger)
ROWS: Final = 64
WIDTH: Final = 16
# far rows, where float32 arithmetic and exact angles part (the last is the largest
# int32 position id, PE_MAX_POSITION's default)
FAR: Final = (1_000, 1_000_000, 100_000_000, 2**31 - 1)


class Entry(BaseModel):
    """One entry of the float32 table."""

    row: int
    column: int
    value: float = Field(description="The float32 value, written exactly as a double.")


class Vector(BaseModel):
    """A preset's table under one rounding, to check a port against."""

    rounding: Rounding
    query: str = Field(description="The GET /v1/encodings/sinusoidal query of the table.")
    shape: list[int]
    sha256: str = Field(
        description="SHA-256 of the table's bytes: float32, little-endian, row after row "
        "(the body of format=raw)."
    )
    far: list[Entry] = Field(description="The first and last column at rows far out.")


def vectors(name: str) -> tuple[Vector, ...]:
    """The test vectors of preset ``name``, one per rounding (computed once an engine: a
    torch preset's library table is the library engine's)."""
    return _vectors(name, kernels.label())


@functools.cache
def _vectors(name: str, engine: str) -> tuple[Vector, ...]:
    width = max(WIDTH, PRESETS[name].min_d)
    found = []
    for rounding in ROUNDINGS:
        key = preset_key(width, "float32", name, rounding, {}, None)
        table = registry.rows(key, 0, ROWS)
        far = registry.take(key, np.array(FAR, dtype=np.int64))
        query = f"max_len={ROWS}&d_model={width}&preset={name}&rounding={rounding}"
        found.append(
            Vector(
                rounding=rounding,
                query=query,
                shape=[ROWS, width],
                sha256=hashlib.sha256(table.astype("<f4").tobytes()).hexdigest(),
                far=[
                    Entry(row=row, column=column, value=float(far[i, column]))
                    for i, row in enumerate(FAR)
                    for column in (0, width - 1)
                ],
            )
        )
    return tuple(found)

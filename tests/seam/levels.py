"""A key built from a posted document: row p of a table of levels is ``p * scale`` in
every column; ``POST .../from-config`` reads ``{"hidden": ..., "factor": ...,
"positions": ...}`` into the ``GET``'s ``width``, ``scale`` and ``max_len``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.codecs.types import TableFormat
from service.encodings.registry import DType, Family, Rows
from service.errors import InvalidInput, MalformedBody
from service.handlers import Block
from service.web.declared import Declared, FromDocument


@dataclass(frozen=True, slots=True)
class LevelKey:
    width: int
    scale: float = 1.0
    dtype: DType = "float32"


def take(key: LevelKey, positions: NDArray[np.int64]) -> Rows:
    return np.repeat((positions * key.scale)[:, None], key.width, axis=1).astype(key.dtype)


def fill(key: LevelKey, start: int, out: Sequence[Rows]) -> None:
    for part in out:
        part[...] = take(key, np.arange(start, start + len(part)))
        start += len(part)


class LevelQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    width: int = Field(ge=1)
    scale: float = 1.0
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    format: TableFormat | None = None

    def key(self) -> LevelKey:
        return LevelKey(self.width, self.scale, self.dtype)


class DocumentQuery(BaseModel):
    """What the document does not say."""

    model_config = ConfigDict(extra="forbid")

    max_len: int | None = Field(None, ge=1)
    start: int = Field(0, ge=0)
    dtype: DType = "float32"
    format: TableFormat | None = None


def read(body: bytes | bytearray) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidInput("body", "must be a JSON object")
    return document


def fields(document: dict[str, Any], asked: Mapping[str, Any]) -> dict[str, Any]:
    names = {"hidden": "width", "factor": "scale", "positions": "max_len"}
    return {names[name]: value for name, value in document.items() if name in names}


TABLE = Declared(
    family=Family("levels", LevelKey, fill, take),
    query=LevelQuery,
    key=LevelQuery.key,
    block=lambda query, key: Block(key, query.start, query.max_len, 0, key.width, query.max_len),
    describe=lambda query, key: query.model_dump(exclude={"format"}),
    document=LevelQuery,
    summary="Levels.",
    operation_id="getLevels",
    from_document=FromDocument(
        read=read,
        fields=fields,
        query=DocumentQuery,
        summary="Levels from a document.",
        operation_id="getLevelsFromDocument",
        body="A document: hidden, factor, positions.",
        missing={"max_len": "the document has no positions: give max_len"},
    ),
)

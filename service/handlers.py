"""Transport-free pipelines, for any family: serve a block of a table (rows from the paged
cache, sliced, or a block computed per request; encoded), the tables of a document that
makes one per kind of layer, and the permit a large answer holds. Applying a kernel to a
posted batch is :mod:`service.batches`', rows at posted ids :mod:`service.ids`'. They take
parsed values and return encoded answers; HTTP is the web toolkit's business."""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import orjson

from service import codecs
from service.codecs.types import MEDIA_TYPES, Encoded, Format, Headers, Parts
from service.encodings import registry
from service.encodings.registry import Key
from service.limits import Limits
from service.runtime import Runtime

# Bump when the bytes of any table answer change for the same parameters.
TABLE_REVISION: Final = "3"
# An answer this large takes one of the large-answer permits until it has been sent.
LARGE_ANSWER_BYTES: Final = 8 << 20
# Smaller JSON answers are not worth compressing.
GZIP_MIN_ELEMENTS: Final = 64
# Encoding more than this would hold up the event loop for a noticeable time.
_INLINE_JSON_ELEMENTS: Final = 1 << 12
_INLINE_BINARY_BYTES: Final = 4 << 20


@dataclass(frozen=True, slots=True)
class Block:
    """Rows ``start .. stop-1`` and columns ``dim_start .. dim_stop-1`` of ``key``'s table
    of ``max_len`` rows (positions ``0 .. max_len-1``)."""

    key: Key
    start: int
    stop: int
    dim_start: int
    dim_stop: int
    max_len: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The answer's: rows × columns, or what a family computed per request makes."""
        if registry.per_request(self.key):
            return registry.shape(self.key, self.start, self.stop)
        return self.stop - self.start, self.dim_stop - self.dim_start

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes of the rows it computes (all their columns)."""
        return (self.stop - self.start) * registry.row_bytes(self.key)

    @property
    def large(self) -> bool:
        """Whether the rows it computes pass ``LARGE_ANSWER_BYTES``."""
        return self.nbytes > LARGE_ANSWER_BYTES


@dataclass(frozen=True, slots=True)
class Answer:
    """An encoded answer, and the permit to give back once it has been sent (if any)."""

    headers: Headers
    body: bytes | memoryview
    release: Callable[[], None] | None = None


def check_table(limits: Limits, block: Block, fmt: Format, width_name: str) -> None:
    """The limits a table request must be within, before anything is computed."""
    rows = block.stop - block.start
    limits.table_rows(rows, block.key.width, block.max_len, width_name, registry.shift(block.key))
    if codecs.textual(fmt):
        limits.json_answer(block.elements)


async def rows(runtime: Runtime, key: Key, start: int, stop: int) -> Parts:
    """Rows ``start .. stop`` of ``key``'s table as consecutive blocks: from the cache, or
    computed in a worker thread."""
    parts = runtime.cache.peek(key, start, stop)
    if parts is None:
        # a new key's preparation is CPU work like its rows: a one-row table of the widest
        # new rotary key takes the CPU lane, not the quick one small requests share
        elements = (stop - start) * key.width + registry.preparation(key)
        parts = await runtime.compute(elements, runtime.cache.rows, key, start, stop)
    return parts


class Permit:
    """One of the large-answer permits held (or none, for a small answer): given back when
    the ``async with`` block ends, unless :meth:`hand_over` passed it to the answer."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None] | None) -> None:
        self._release = release

    def hand_over(self) -> Callable[[], None] | None:
        """What gives the permit back, now the caller's to call (once the answer has been
        sent): the block's end no longer does. None when no permit is held."""
        release, self._release = self._release, None
        return release

    def give_back(self) -> None:
        release = self.hand_over()
        if release is not None:
            release()


@asynccontextmanager
async def permit(runtime: Runtime, large: bool) -> AsyncIterator[Permit]:
    """``async with permit(runtime, large):`` holds one of the few large-answer permits
    for a ``large`` computation (nothing for a small one), as ``async with semaphore``
    does; an answer keeps it until it has been sent with :meth:`Permit.hand_over`."""
    if not large:
        yield Permit(None)
        return
    permits = runtime.large_answers
    await permits.acquire()
    held = Permit(permits.release)
    try:
        yield held
    finally:
        held.give_back()


async def encoded(
    runtime: Runtime, fmt: Format, elements: int, nbytes: int, encode: Callable[[], Encoded]
) -> Encoded:
    """``encode()`` on the event loop when the answer is small, else in a worker thread."""
    inline = (
        elements <= _INLINE_JSON_ELEMENTS if codecs.textual(fmt) else nbytes <= _INLINE_BINARY_BYTES
    )
    return encode() if inline else await runtime.compute(elements, encode)


async def table(
    runtime: Runtime,
    block: Block,
    fields: Mapping[str, Any],
    fmt: Format,
    gzip: bool,
) -> Encoded:
    """The encoded block. A cached family's rows come from the cache's pages, sliced (a
    row's named arrays are encoded as named members, or stacked); a family computed per
    request computes its block with its encoding, in one worker-thread hop for a large
    one. A large block's permit is its caller's (:func:`permit`, ``Block.large``)."""
    key, elements = block.key, block.elements
    nbytes = elements * np.dtype(key.dtype).itemsize
    if registry.per_request(key):
        work = functools.partial(_computed, fmt, fields, block, gzip)
        return await encoded(runtime, fmt, elements, nbytes, work)
    parts = await rows(runtime, key, block.start, block.stop)
    sliced = [part[:, block.dim_start : block.dim_stop] for part in parts]
    work = (
        functools.partial(_encode_named, fmt, fields, registry.split(key, sliced), gzip)
        if registry.arrays(key)
        else functools.partial(encode, fmt, fields, sliced, "data", gzip)
    )
    return await encoded(runtime, fmt, elements, nbytes, work)


def _computed(fmt: Format, fields: Mapping[str, Any], block: Block, gzip: bool) -> Encoded:
    computed = registry.block(block.key, block.start, block.stop)
    return encode(fmt, fields, [computed], "data", gzip)


def encode(fmt: Format, fields: Mapping[str, Any], parts: Parts, key: str, gzip: bool) -> Encoded:
    """``parts`` encoded as the array ``key`` of an answer in ``fmt``, gzipped if asked."""
    encoded = codecs.encode(fmt, fields, parts, key)
    return codecs.gzip(encoded) if gzip and codecs.textual(fmt) else encoded


def _encode_named(
    fmt: Format, fields: Mapping[str, Any], arrays: Mapping[str, Parts], gzip: bool
) -> Encoded:
    encoded = codecs.encode_named(fmt, fields, arrays)
    return codecs.gzip(encoded) if gzip and codecs.textual(fmt) else encoded


async def tables(
    runtime: Runtime,
    blocks: Mapping[str, Block],
    described: Mapping[str, Mapping[str, Any]],
    layers: Sequence[str] | None,
    read: list[str],
    fmt: Format,
    gzip: bool,
) -> Encoded:
    """The tables of a document that makes one per kind of layer, each block named by its
    kind, in one answer: JSON ``{"layer_types": layers, "config_fields": read, "tables":
    {NAME: {its ``described`` fields and arrays}}}``, or members ``NAME/cos``,
    ``NAME/sin`` (``NAME/data`` for a row of one array) beside the fields and the lists."""
    arrays = {}
    for name, block in blocks.items():
        parts = await rows(runtime, block.key, block.start, block.stop)
        sliced = [part[:, block.dim_start : block.dim_stop] for part in parts]
        named = registry.split(block.key, sliced) if registry.arrays(block.key) else None
        arrays[name] = named or {"data": sliced}
    elements = sum(block.elements for block in blocks.values())
    nbytes = sum(block.nbytes for block in blocks.values())
    work = functools.partial(_encode_tables, fmt, layers, read, described, arrays, gzip)
    return await encoded(runtime, fmt, elements, nbytes, work)


def _encode_tables(
    fmt: Format,
    layers: Sequence[str] | None,
    read: list[str],
    described: Mapping[str, Mapping[str, Any]],
    arrays: Mapping[str, Mapping[str, Parts]],
    gzip: bool,
) -> Encoded:
    if fmt == "json":
        each = {
            name: orjson.Fragment(codecs.encode_named("json", described[name], named)[1])
            for name, named in arrays.items()
        }
        document = {"layer_types": layers, "config_fields": read}
        body = orjson.dumps({**document, "tables": each})
        encoded: Encoded = {"content-type": MEDIA_TYPES["json"]}, body
        return codecs.gzip(encoded) if gzip else encoded
    members = {
        f"{name}/{member}": parts
        for name, named in arrays.items()
        for member, parts in named.items()
    }
    # the lists last: no table's name takes their place (the reading refuses such names)
    notes = {**described, "layer_types": layers, "config_fields": read}
    return codecs.encode_named(fmt, notes, members)

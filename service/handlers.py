"""Transport-free pipelines, for any family: serve a block of a table (rows from the paged
cache, sliced, encoded, with its strong validator and, for a large answer, a permit), and
apply a kernel to a posted batch (decode, check, fetch the rows its positions need,
compute, encode). They take parsed values and return encoded answers; HTTP is the web
toolkit's business."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from service import codecs
from service.arrays import joined
from service.cache import Cache
from service.codecs.types import BodyFormat, Encoded, Format, Headers, Parts
from service.encodings import registry
from service.encodings.registry import DType, Key, Rows
from service.errors import InvalidParameter
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
# Scattered positions whose span is at most this many times their count (plus a page)
# are read from the cache's pages; sparser ones are computed on their own.
_DENSE_SPAN: Final = 4


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
    def shape(self) -> tuple[int, int]:
        return self.stop - self.start, self.dim_stop - self.dim_start

    @property
    def large(self) -> bool:
        """Whether the rows it computes (all their columns) pass ``LARGE_ANSWER_BYTES``."""
        return (self.stop - self.start) * registry.row_bytes(self.key) > LARGE_ANSWER_BYTES


@dataclass(frozen=True, slots=True)
class Answer:
    """An encoded answer, and the permit to give back once it has been sent (if any)."""

    headers: Headers
    body: bytes | memoryview
    release: Callable[[], None] | None = None


def check_table(limits: Limits, block: Block, fmt: Format, width_name: str) -> None:
    """The limits a table request must be within, before anything is computed."""
    rows, cols = block.shape
    limits.table_rows(rows, block.key.width, block.max_len, width_name, registry.shift(block.key))
    if codecs.textual(fmt):
        limits.json_answer(rows * cols)


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


@asynccontextmanager
async def turn(runtime: Runtime, large: bool) -> AsyncIterator[None]:
    """For a large computation, hold one of the few large-answer permits meanwhile."""
    if not large:
        yield
        return
    async with runtime.large_answers:
        yield


# A family whose rows hold several arrays side by side (rotary: cos, then sin) gives the
# blocks of each by name; they are encoded as named members, or stacked.
Named = Callable[[Parts], Mapping[str, Parts]]


async def holding_permit(
    runtime: Runtime,
    large: bool,
    produce: Callable[[], Awaitable[tuple[Headers, bytes | memoryview]]],
) -> Answer:
    """The answer ``produce`` encodes; a ``large`` one holds one of the large-answer permits
    meanwhile and until it has been sent (:attr:`Answer.release`)."""
    permits = runtime.large_answers if large else None
    if permits is not None:
        await permits.acquire()
    try:
        headers, body = await produce()
    except BaseException:
        if permits is not None:
            permits.release()
        raise
    return Answer(headers, body, permits.release if permits is not None else None)


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
    named: Named | None = None,
) -> Answer:
    """The encoded block; a large one holds a permit, released by :attr:`Answer.release`."""

    async def produce() -> Encoded:
        parts = await rows(runtime, block.key, block.start, block.stop)
        sliced = [part[:, block.dim_start : block.dim_stop] for part in parts]
        elements = block.shape[0] * block.shape[1]
        nbytes = elements * np.dtype(block.key.dtype).itemsize
        encode = (
            functools.partial(_encode, fmt, fields, sliced, "data", gzip)
            if named is None
            else functools.partial(_encode_named, fmt, fields, named(sliced), gzip)
        )
        return await encoded(runtime, fmt, elements, nbytes, encode)

    return await holding_permit(runtime, block.large, produce)


def _encode(fmt: Format, fields: Mapping[str, Any], parts: Parts, key: str, gzip: bool) -> Encoded:
    encoded = codecs.encode(fmt, fields, parts, key)
    return codecs.gzip(encoded) if gzip and codecs.textual(fmt) else encoded


def _encode_named(
    fmt: Format, fields: Mapping[str, Any], arrays: Mapping[str, Parts], gzip: bool
) -> Encoded:
    encoded = codecs.encode_named(fmt, fields, arrays)
    return codecs.gzip(encoded) if gzip and codecs.textual(fmt) else encoded


class Kernel(Protocol):
    """What apply runs on a batch: its checks, its arithmetic dtype, and the computation
    with the table rows its positions need."""

    def check(
        self, embeddings: NDArray[Any], position_ids: NDArray[Any] | None
    ) -> NDArray[np.int64] | None: ...

    def dtype(self, embeddings: NDArray[Any]) -> DType: ...

    def __call__(
        self,
        embeddings: NDArray[Any],
        table: Sequence[Rows],
        index: NDArray[np.intp] | None,
        *,
        in_place: bool,
    ) -> NDArray[np.floating]: ...


@dataclass(frozen=True, slots=True)
class Apply:
    """An apply request: the body's format and the answer's, the kernel, the family key
    for a batch's width and dtype, where its positions start; a raw body's shape and dtype."""

    kind: BodyFormat
    fmt: Format
    gzip: bool
    kernel: Kernel
    key: Callable[[int, DType], Key]
    offset: int = 0
    max_len: int | None = None
    layout: tuple[tuple[int, ...], str] | None = None


def apply(
    runtime: Runtime, body: bytearray, request: Apply, hold: Callable[[int], None] | None = None
) -> Answer:
    """Decode, check, fetch the rows, compute, encode: the whole of an apply, run in a
    worker thread; ``hold`` is told of what decoding makes beside the body (an ``.npz``'s
    decompressed members)."""
    limits = runtime.limits
    arrays = codecs.decode(
        request.kind, body, limits.body_bytes, limits.json_elements, request.layout, hold
    )
    embeddings = arrays["embeddings"]
    in_place = request.kind in codecs.VIEWS  # the batch is a view of our own copy of the body
    result = apply_arrays(runtime, embeddings, arrays.get("position_ids"), request, in_place)
    if result is embeddings and request.fmt == request.kind in ("npy", "raw"):
        # The body is the result (after the client's .npy header): send it back as is.
        npy = {"content-type": codecs.types.MEDIA_TYPES["npy"]}
        raw = request.fmt == "raw"
        return Answer(
            codecs.raw.headers(result.shape, result.dtype) if raw else npy, memoryview(body)
        )
    fields = {"dtype": result.dtype.name, "shape": list(result.shape)}
    return Answer(*_encode(request.fmt, fields, [result], "embeddings", request.gzip))


def apply_arrays(
    runtime: Runtime,
    embeddings: NDArray[Any],
    position_ids: NDArray[Any] | None,
    request: Apply,
    in_place: bool = False,
) -> NDArray[np.floating]:
    """The kernel applied to a decoded batch (checked, with the table rows its positions
    need), whatever the transport; ``in_place``: ``embeddings`` may be overwritten."""
    limits = runtime.limits
    positions = request.kernel.check(embeddings, position_ids)
    if codecs.textual(request.fmt):
        limits.json_answer(embeddings.size, hint="ask for format=npy")
    limits.row_width(int(embeddings.shape[-1]), "the embeddings' last axis")
    key = request.key(int(embeddings.shape[-1]), request.kernel.dtype(embeddings))
    length, offset, max_len = embeddings.shape[-2], request.offset, request.max_len
    rows, index = _rows_for(runtime.cache, limits, key, length, offset, max_len, positions)
    return request.kernel(embeddings, rows, index, in_place=in_place)


def rows_at(runtime: Runtime, key: Key, positions: NDArray[np.int64]) -> NDArray[np.floating]:
    """The rows of ``key``'s table at ``positions`` (non-negative, in any order, repeated
    or not), as one array: the cache's pages when they are dense, else computed alone."""
    if not len(positions):
        return np.empty((0, key.width), key.dtype)
    rows, index = _rows_for(runtime.cache, runtime.limits, key, 0, 0, None, positions)
    return joined(rows)[index]


def _rows_for(
    cache: Cache,
    limits: Limits,
    key: Key,
    length: int,
    offset: int,
    max_len: int | None,
    positions: NDArray[np.int64] | None,
) -> tuple[Parts, NDArray[np.intp] | None]:
    """The table rows a batch needs, as consecutive blocks, and which of them each
    embedding gets (``None``: the rows in order). Contiguous positions come from the
    cache's pages; scattered ones too when they are dense, else they are computed on
    their own: a request costs what its positions need, never the rows below them."""
    if positions is None:
        first, last = offset, offset + length - 1
    else:
        unique, inverse = np.unique(positions, return_inverse=True)
        first, last = int(unique[0]), int(unique[-1])
    if max_len is not None and last >= max_len:
        raise InvalidParameter("max_len", f"position {last} is not below max_len ({max_len})")
    # the largest position the rows touch, whatever shifts it (a preset's start_index)
    shift = registry.shift(key)
    what = "the largest position asked for" + (" (start_index + its row)" if shift else "")
    limits.last_position(last + shift, what)
    span = last - first + 1
    if positions is None:
        limits.rows(span, key.width, "rows × width")
        return cache.rows(key, first, last + 1), None
    dense = span <= _DENSE_SPAN * len(unique) + cache.page_rows(key)
    if dense and limits.allow_rows(span, key.width):
        index = (positions - first).astype(np.intp)
        return cache.rows(key, first, last + 1), index
    limits.rows(len(unique), key.width, "distinct positions × width")
    return [registry.take(key, unique)], inverse.reshape(positions.shape).astype(np.intp)

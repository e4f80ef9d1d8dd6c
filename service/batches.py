"""Transport-free apply, for any family: a kernel run on a posted batch (decode, check,
fetch the rows its positions need, compute, encode), and the rows at any positions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from service import codecs
from service.arrays import joined
from service.cache import Cache
from service.codecs.types import BodyFormat, Format, Parts
from service.encodings import registry
from service.encodings.registry import DType, Key, Rows
from service.errors import InvalidParameter
from service.handlers import Answer, encode
from service.limits import Limits
from service.runtime import Runtime

# Scattered positions whose span is at most this many times their count (plus a page)
# are read from the cache's pages; sparser ones are computed on their own.
_DENSE_SPAN: Final = 4


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

    def stated(self, embeddings: NDArray[Any]) -> dict[str, Any]:
        """What it uses beyond the rows, as an answer states it (additive: the scale)."""
        ...


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
    runtime: Runtime,
    body: bytearray,
    request: Apply,
    hold: Callable[[int], None] | None = None,
    archive: Any = None,
) -> Answer:
    """Decode, check, fetch the rows, compute, encode: the whole of an apply, run in a
    worker thread; ``hold`` is told of what decoding makes beside the body (an ``.npz``'s
    decompressed members); ``archive``: an ``.npz`` body already opened."""
    limits = runtime.limits
    arrays = codecs.decode(
        request.kind, body, limits.body_bytes, limits.json_elements, request.layout, hold, archive
    )
    embeddings = arrays["embeddings"]
    in_place = request.kind in codecs.VIEWS  # the batch is a view of our own copy of the body
    position_ids = arrays.get("position_ids")
    result = apply_arrays(runtime, embeddings, position_ids, request, in_place)
    # once the kernel has checked the batch; what it states depends on its shape alone
    stated = _stated(request, result, position_ids)
    said = {f"x-{name.replace('_', '-')}": str(value) for name, value in stated.items()}
    engine = registry.library_engine(
        request.key(int(embeddings.shape[-1]), request.kernel.dtype(embeddings))
    )
    if engine is not None:
        said["x-library-engine"] = engine
    if result is embeddings and request.fmt == request.kind in ("npy", "raw"):
        # The body is the result (after the client's .npy header): send it back as is.
        npy = {"content-type": codecs.types.MEDIA_TYPES["npy"]}
        raw = request.fmt == "raw"
        headers = codecs.raw.headers(result.shape, result.dtype) if raw else npy
        return Answer({**headers, **said}, memoryview(body))
    fields = {"dtype": result.dtype.name, "shape": list(result.shape), **stated}
    headers, encoded = encode(request.fmt, fields, [result], "embeddings", request.gzip)
    return Answer({**headers, **said}, encoded)


def _stated(
    request: Apply, embeddings: NDArray[Any], position_ids: NDArray[Any] | None
) -> dict[str, Any]:
    """What an apply used, as its answer states it: the positions (the table rows from
    the offset, or the posted ids) and what the kernel adds (the scale)."""
    length = int(embeddings.shape[-2]) if embeddings.ndim >= 2 else 0
    first = request.offset
    positions = "position_ids" if position_ids is not None else f"{first}..{first + length - 1}"
    return {"positions": positions, **request.kernel.stated(embeddings)}


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

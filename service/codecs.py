"""Wire formats: content negotiation, and tables to and from JSON, ``.npy`` and raw bytes.

Encoders are pure functions returning ``(headers, body)``; decoders never unpickle.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

import numpy as np
import orjson
from numpy.typing import NDArray

from service.errors import MalformedBody, NotAcceptable

Format = Literal["json", "npy", "raw"]
FORMATS: Final[tuple[Format, ...]] = get_args(Format)
MEDIA_TYPES: Final[dict[Format, str]] = {
    "json": "application/json",
    "npy": "application/x-npy",
    "raw": "application/octet-stream",
}
Headers = dict[str, str]
_NPY_MAGIC: Final = b"\x93NUMPY\x01\x00"


def _accept_ranges(accept: str) -> list[tuple[str, float]]:
    """``(media range, q)`` for each well-formed entry of an ``Accept`` header, in order."""
    ranges = []
    for entry in accept.split(","):
        media, *params = (part.strip() for part in entry.split(";"))
        media = media.lower()
        if media == "*":
            media = "*/*"
        if media.count("/") != 1:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        ranges.append((media, q))
    return ranges


def _preference(media_type: str, ranges: list[tuple[str, float]]) -> tuple[float, int]:
    """The ``q`` the most specific matching range gives ``media_type``, and that range's
    position in the header (earlier wins a tie)."""
    kind = media_type.split("/")[0]
    best: tuple[int, float, int] = (-1, 0.0, len(ranges))
    for index, (media, q) in enumerate(ranges):
        specificity = {media_type: 2, f"{kind}/*": 1, "*/*": 0}.get(media, -1)
        if specificity > best[0]:
            best = (specificity, q, index)
    return best[1], best[2]


def negotiate(accept: str | None, offered: tuple[Format, ...] = FORMATS) -> Format:
    """The format an ``Accept`` header asks for; the first offered one if it asks for none.

    Highest ``q`` wins, then the range the client listed first, then the order of
    ``offered``. Raises :class:`NotAcceptable` when every offered type has ``q=0``.
    """
    if accept is None or not accept.strip():
        return offered[0]
    ranges = _accept_ranges(accept)
    if not ranges:
        return offered[0]
    ranked = []
    for order, fmt in enumerate(offered):
        q, index = _preference(MEDIA_TYPES[fmt], ranges)
        if q > 0:
            ranked.append((-q, index, order, fmt))
    if not ranked:
        raise NotAcceptable(accept, [MEDIA_TYPES[fmt] for fmt in offered])
    return min(ranked)[3]


def _little_endian(array: NDArray[Any]) -> NDArray[Any]:
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))


def npy_header(shape: tuple[int, ...], dtype: np.dtype[Any]) -> bytes:
    """A version 1.0 ``.npy`` header for a C-order little-endian array."""
    descr = np.lib.format.dtype_to_descr(dtype.newbyteorder("<"))
    text = repr({"descr": descr, "fortran_order": False, "shape": shape})
    size = len(_NPY_MAGIC) + 2 + len(text) + 1
    text += " " * (-size % 64) + "\n"
    return _NPY_MAGIC + len(text).to_bytes(2, "little") + text.encode("latin1")


def encode_npy(array: NDArray[Any]) -> tuple[Headers, bytes]:
    """An ``.npy`` file that ``numpy.load(..., allow_pickle=False)`` reads."""
    data = _little_endian(array)
    body = b"".join((npy_header(data.shape, data.dtype), data.data.cast("B")))
    return {"content-type": MEDIA_TYPES["npy"]}, body


def encode_raw(array: NDArray[Any]) -> tuple[Headers, bytes]:
    """Little-endian C-order bytes, with the shape and dtype in ``X-Shape``/``X-Dtype``."""
    data = _little_endian(array)
    headers = {
        "content-type": MEDIA_TYPES["raw"],
        "x-shape": ",".join(map(str, data.shape)),
        "x-dtype": data.dtype.name,
    }
    return headers, data.tobytes()


@functools.cache
def _float16_texts() -> NDArray[np.object_]:
    """The shortest round-tripping text of every float16 bit pattern (orjson writes
    float16 with float32 digits: ``0.8413086`` where ``0.8413`` is enough)."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return np.array([str(v).encode() for v in values], dtype=object)


def _json_rows(array: NDArray[Any]) -> Any:
    if array.dtype != np.float16:
        return np.ascontiguousarray(array)
    texts = _float16_texts()[array.view(np.uint16)]
    return orjson.Fragment(b"[" + b",".join(b"[" + b",".join(row) + b"]" for row in texts) + b"]")


def encode_json(fields: Mapping[str, Any], array: NDArray[Any]) -> tuple[Headers, bytes]:
    """``fields`` followed by ``"data"``: the rows of ``array``, each float in the shortest
    text that reads back to the same value at the array's dtype."""
    document = {**fields, "data": _json_rows(array)}
    body = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return {"content-type": MEDIA_TYPES["json"]}, body


def encode(fmt: Format, fields: Mapping[str, Any], array: NDArray[Any]) -> tuple[Headers, bytes]:
    """``array`` in ``fmt``; ``fields`` describe it and appear in JSON only."""
    if fmt == "json":
        return encode_json(fields, array)
    if fmt == "npy":
        return encode_npy(array)
    return encode_raw(array)


def decode_npy(body: bytes) -> NDArray[Any]:
    """The array in an ``.npy`` body; never unpickles (object arrays are refused)."""
    if not body.startswith(b"\x93NUMPY"):
        raise MalformedBody("not an .npy file: it does not start with the .npy magic bytes")
    try:
        array = np.lib.format.read_array(io.BytesIO(body), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise MalformedBody(f"not a readable .npy file: {exc}") from None
    return array


def decode_raw(body: bytes, shape: tuple[int, ...], dtype: str) -> NDArray[Any]:
    """Little-endian C-order bytes as an array of ``shape`` and ``dtype``."""
    expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if len(body) != expected:
        raise MalformedBody(f"expected {expected} bytes for {shape} {dtype}, got {len(body)}")
    return np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)

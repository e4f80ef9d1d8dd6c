"""The apply pipeline: a posted body to the encoded result, in one worker-thread call."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from numpy.typing import NDArray

from service import codecs, core
from service.cache import TableCache, TableKey
from service.errors import InvalidParameter, LimitExceeded
from service.schemas import ApplyQuery
from service.settings import Settings


def apply_batch(
    body: bytearray,
    kind: codecs.BodyFormat,
    fmt: codecs.Format,
    query: ApplyQuery,
    cache: TableCache,
    settings: Settings,
    gzip: bool = False,
) -> tuple[codecs.Headers, bytes | memoryview]:
    """Decode, check, apply, encode: the whole of an apply, run in a worker thread."""
    if kind == "npy":
        embeddings, ids = codecs.decode_npy(body), None
    elif kind == "npz":
        embeddings, ids = codecs.decode_npz(body, settings.max_body_bytes)
    else:
        embeddings, ids = codecs.decode_json(body, settings.max_json_elements)
    positions = core.check_batch(embeddings, ids)
    rows = core.rows_needed(embeddings, query.offset, positions)
    if query.max_len is not None and rows > query.max_len:
        raise InvalidParameter(
            "max_len", f"position {rows - 1} is not below max_len ({query.max_len})"
        )
    d_model = int(embeddings.shape[-1])
    if rows * d_model > settings.max_elements:
        raise LimitExceeded(
            "the table the positions need (rows × d_model)",
            rows * d_model,
            settings.max_elements,
            "PE_MAX_ELEMENTS",
        )
    if fmt == "json" and embeddings.size > settings.max_json_elements:
        raise LimitExceeded(
            "the JSON response's element count",
            embeddings.size,
            settings.max_json_elements,
            "PE_MAX_JSON_ELEMENTS; ask for format=npy",
        )
    key = TableKey(d_model, query.base, query.layout, core.compute_dtype(embeddings))
    scale = math.sqrt(d_model) if query.scale is None else query.scale
    in_place = kind == "npy"  # the batch is a view of our own copy of the body
    table = cache.get(key, rows)
    result = core.apply(embeddings, table, scale, query.offset, positions, in_place=in_place)
    if fmt == "npy" and result is embeddings:
        # The body is the client's .npy header followed by the result: send it back as is.
        return {"content-type": codecs.MEDIA_TYPES["npy"]}, memoryview(body)
    fields = {"dtype": result.dtype.name, "shape": list(result.shape)}
    return encode_block(fmt, fields, result, key="embeddings", gzip=gzip)


def encode_block(
    fmt: codecs.Format,
    fields: Mapping[str, Any],
    array: NDArray[Any],
    key: str = "data",
    *,
    gzip: bool = False,
) -> tuple[codecs.Headers, bytes]:
    """:func:`codecs.encode`, then gzip when asked (JSON only: binary does not compress)."""
    headers, body = codecs.encode(fmt, fields, array, key)
    return codecs.gzipped(headers, body) if gzip and fmt == "json" else (headers, body)

"""OpenAPI declarations that several operations share: problem responses, binary media
types, the headers of a table answer."""

from __future__ import annotations

from typing import Any, Final

from service import codecs
from service.codecs.types import FORMATS, MEDIA_TYPES, TABLE_FORMATS
from service.schemas.common import ApplyBody, ApplyDocument, Problem
from service.web.problems import PROBLEM_MEDIA_TYPE

_PROBLEM_CAUSES: Final = {
    400: "The body is not readable as its media type.",
    406: "No offered format is acceptable.",
    408: "No byte of the body arrived for PE_BODY_TIMEOUT seconds.",
    413: "The body is over PE_MAX_BODY_BYTES.",
    415: "The body's media type is not one the endpoint reads.",
    422: "A parameter is invalid or a limit is exceeded.",
    501: "This installation cannot draw pictures: it lacks the plots extra (matplotlib).",
    503: "Not ready: the PE_PRELOAD tables are still being computed, or failed.",
}
# a posted body, while the bodies held at once are at PE_POSTED_BYTES
BUSY: Final[dict[int | str, dict[str, Any]]] = {
    503: {
        "model": Problem,
        "content": {PROBLEM_MEDIA_TYPE: {}},
        "description": "Busy: the bodies posted at once would pass PE_POSTED_BYTES; send it "
        "again after Retry-After seconds.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    }
}
BINARY: Final = {"schema": {"type": "string", "format": "binary"}}


def problems_of(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem responses an operation can give."""
    return {
        status: {
            "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {}},
            "description": _PROBLEM_CAUSES[status],
        }
        for status in statuses
    }


def media(formats: tuple[str, ...]) -> dict[str, Any]:
    """The ``content`` of a response offered in ``formats`` (JSON described by its model)."""
    return {
        MEDIA_TYPES[fmt]: {} if codecs.textual(fmt) else BINARY  # type: ignore[arg-type, index]
        for fmt in formats
    }


TABLE_MEDIA: Final = media(TABLE_FORMATS)
APPLY_MEDIA: Final = media(FORMATS)
APPLY_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": "The batch: JSON; an .npy file; an .npz archive or a safetensors file "
    "(embeddings, optional position_ids); or raw little-endian C-order numbers, whose shape "
    "and dtype the X-Shape and X-Dtype headers (or the shape and dtype parameters) give.",
    "content": {
        "application/json": {"schema": ApplyBody.model_json_schema()},
        MEDIA_TYPES["npy"]: BINARY,
        MEDIA_TYPES["npz"]: BINARY,
        MEDIA_TYPES["safetensors"]: BINARY,
        MEDIA_TYPES["raw"]: BINARY,
    },
}
LIBRARY_ENGINE: Final = (
    "rounding=library where the library is torch: what computed its float32 exp, sin, cos "
    "and pow (PE_LIBRARY_ENGINE), 'torch VERSION CAPABILITY' (torch's own CPU kernels: bit "
    "for bit) or 'numpy' (correctly rounded: within an ulp). Absent where no engine is used."
)
ENGINE_HEADER: Final = {
    "X-Library-Engine": {"description": LIBRARY_ENGINE, "schema": {"type": "string"}}
}
TABLE_HEADERS: Final = {
    name: {"description": text, "schema": {"type": "string"}}
    for name, text in {
        "ETag": "Strong validator; send it back in If-None-Match for a 304.",
        "Cache-Control": "public, max-age=31536000, immutable: tables never change.",
        "X-Shape": "raw only: rows,cols of the block.",
        "X-Dtype": "raw only: float32, float64 or float16.",
        "X-Library-Engine": LIBRARY_ENGINE,
    }.items()
}
APPLY_HEADERS: Final = {
    name: {"description": text, "schema": {"type": "string"}}
    for name, text in {
        "X-Shape": "raw only: the result's shape, comma-separated.",
        "X-Dtype": "raw only: float32, float64 or float16.",
        "X-Positions": "The positions used: FIRST..LAST table rows, or position_ids.",
        "X-Scale": "Additive encodings: the factor the embeddings were multiplied by.",
        "X-Library-Engine": LIBRARY_ENGINE,
    }.items()
}
# the answers of an apply route, whichever family
APPLY_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "model": ApplyDocument,
        "content": APPLY_MEDIA,
        "description": "The result.",
        "headers": APPLY_HEADERS,
    },
    **problems_of(400, 406, 408, 413, 415, 422),
    **BUSY,
}
NOT_MODIFIED: Final = {"description": "Not modified: the If-None-Match tag is current."}


def inline(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic model's JSON schema with its ``$defs`` written in where they are used: a
    request body given as ``openapi_extra`` has no components of its own to refer to."""
    defs = schema.get("$defs", {})

    def written(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return written(defs[ref.removeprefix("#/$defs/")])
            return {key: written(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [written(item) for item in node]
        return node

    return written(schema)  # type: ignore[no-any-return]


# what the bounded protocol answers before any route sees the request (server/protocol.py)
_PROTOCOL_REFUSALS: Final = {
    "414": "The request line is over 8 KiB (a query string that long): refused by the server "
    "before any route reads it.",
    "431": "The request head is over 32 KiB: refused by the server before any route reads it.",
}


def with_protocol_refusals(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the refusals the server's protocol may give any operation (414,
    431) in each operation's responses; what it writes into is copied first."""
    refusals = {
        status: {
            "description": description,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status, description in _PROTOCOL_REFUSALS.items()
    }
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            operation["responses"] = {**operation.get("responses", {}), **refusals}
    return document

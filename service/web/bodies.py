"""Posted bodies: which format a ``Content-Type`` names, and reading a body within
``PE_MAX_BODY_BYTES``."""

from __future__ import annotations

from fastapi import Request

from service.codecs.types import BODY_FORMATS, MEDIA_TYPES, BodyFormat
from service.errors import Limit, MalformedBody, UnsupportedMediaType

_BODY_TYPES = {MEDIA_TYPES[fmt]: fmt for fmt in BODY_FORMATS}


def body_format(content_type: str | None) -> BodyFormat:
    """The body format a ``Content-Type`` names; 415 for any other."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in _BODY_TYPES:
        raise UnsupportedMediaType(content_type, list(_BODY_TYPES))
    return _BODY_TYPES[media]


async def read_body(request: Request, size: Limit) -> bytearray:
    """The request body, refused with 413 as soon as it is known to pass ``size``: from
    ``Content-Length`` before reading, or while reading a chunked body."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        size.check_body("the request body", int(declared))
        body = bytearray(int(declared))  # one buffer of the right size: no copies while reading
        filled = 0
        with memoryview(body) as view:
            async for chunk in request.stream():
                if filled + len(chunk) > len(body):
                    raise MalformedBody("the body is longer than its Content-Length")
                view[filled : filled + len(chunk)] = chunk
                filled += len(chunk)
        return body if filled == len(body) else body[:filled]
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        size.check_body("the request body (at least)", len(body))
    return body

"""Posted bodies: which format a ``Content-Type`` names, and reading a body within
``PE_MAX_BODY_BYTES`` and ``PE_BODY_TIMEOUT``."""

from __future__ import annotations

import time
from contextlib import aclosing

import anyio
from fastapi import Request
from starlette.requests import ClientDisconnect

from service.codecs.types import BODY_FORMATS, MEDIA_TYPES, BodyFormat
from service.errors import (
    ClientGone,
    Limit,
    MalformedBody,
    RequestTimeout,
    UnsupportedMediaType,
)

_BODY_TYPES = {MEDIA_TYPES[fmt]: fmt for fmt in BODY_FORMATS}


def body_format(content_type: str | None) -> BodyFormat:
    """The body format a ``Content-Type`` names; 415 for any other."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in _BODY_TYPES:
        raise UnsupportedMediaType(content_type, list(_BODY_TYPES))
    return _BODY_TYPES[media]


async def read_body(
    request: Request,
    size: Limit,
    *,
    idle_timeout: float | None = None,
    min_rate: int | None = None,
    grace: float = 0.0,
) -> bytearray:
    """The request body, refused with 413 as soon as it is known to pass ``size``: from
    ``Content-Length`` before reading, or while reading. Memory follows the bytes that
    arrive, not the length a client declares. With ``idle_timeout``, a body that goes that
    many seconds without a byte is refused with 408; with ``min_rate``, so is a body that
    arrives slower than ``min_rate`` bytes a second on average after ``grace`` seconds (a
    byte now and then keeps no body, and the memory it holds, for ever).
    A client that leaves is a 499."""
    declared = request.headers.get("content-length", "")
    length = int(declared) if declared.isdigit() else None
    if length is not None:
        size.check_body("the request body", length)
    # The chunks as they arrive, joined once at the end: memory follows the bytes received
    # (a buffer of the declared length would be resident before they came), each byte is
    # copied once, and the joined body comes from memory the allocator reuses.
    chunks: list[bytes] = []
    received = 0
    started = time.monotonic()
    by_rate = False
    try:
        async with aclosing(request.stream()) as stream:
            while True:
                wait, by_rate = idle_timeout, False
                if min_rate is not None:
                    # the moment the average falls below min_rate if nothing more arrives
                    due = started + grace + received / min_rate - time.monotonic()
                    if idle_timeout is None or due < idle_timeout:
                        wait, by_rate = max(0.0, due), True
                with anyio.fail_after(wait):
                    chunk = await anext(stream, None)
                if chunk is None:
                    return bytearray().join(chunks)
                chunks.append(chunk)
                received += len(chunk)
                if length is None:
                    size.check_body("the request body (at least)", received)
                elif received > length:
                    raise MalformedBody("the body is longer than its Content-Length")
    except TimeoutError:
        elapsed = time.monotonic() - started
        if by_rate:
            raise RequestTimeout(
                f"the request body arrives slower than {min_rate:,} bytes a second "
                f"(PE_MIN_READ_RATE, after {grace:g} s of grace): {received:,} bytes "
                f"in {elapsed:.0f} s; the connection is closed",
                setting="PE_MIN_READ_RATE",
            ) from None
        raise RequestTimeout(
            f"no byte of the request body arrived for {idle_timeout:g} s (PE_BODY_TIMEOUT) "
            f"after {received:,} bytes; the connection is closed",
            setting="PE_BODY_TIMEOUT",
        ) from None
    except ClientDisconnect:
        raise ClientGone(f"the client left after sending {received:,} bytes") from None

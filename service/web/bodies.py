"""Posted bodies: which format a ``Content-Type`` names, the shape and dtype a raw body
declares, and reading a body within ``PE_MAX_BODY_BYTES``, ``PE_BODY_TIMEOUT`` and, with
every other body the process holds, ``PE_POSTED_BYTES``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import aclosing
from typing import Final, TypeVar

import anyio
from fastapi import Request
from starlette.requests import ClientDisconnect

from service import codecs
from service.codecs import raw
from service.codecs.types import BODY_FORMATS, MEDIA_TYPES, BodyFormat
from service.errors import (
    ClientGone,
    Limit,
    MalformedBody,
    RequestTimeout,
    UnsupportedMediaType,
)
from service.limits import Reservation
from service.runtime import Runtime
from service.text import shown

# A raw body's dtype when neither X-Dtype nor the dtype parameter says (as a JSON body's).
RAW_DTYPE = "float32"
# What curl sends without -H 'Content-Type: ...': -d's default, and -F's.
_FORM: Final = "application/x-www-form-urlencoded"
_MULTIPART: Final = "multipart/form-data"


def body_format(
    content_type: str | None, accepted: Sequence[BodyFormat] = BODY_FORMATS
) -> BodyFormat:
    """The format, among ``accepted`` (an endpoint's, in its order of preference), that a
    ``Content-Type`` names; 415 for any other, listing exactly the accepted types, with how
    to send one where the type sent says how the client was called (curl's ``-d``)."""
    media = (content_type or "").split(";")[0].strip().lower()
    types = {MEDIA_TYPES[fmt]: fmt for fmt in accepted}
    if media not in types:
        raise UnsupportedMediaType(content_type, list(types), _hint(media, accepted))
    return types[media]


def _hint(media: str, accepted: Sequence[BodyFormat]) -> str:
    """How to send a body of an ``accepted`` format, for a client that sent ``media``:
    curl's defaults (``-d``, ``-F``) and no type at all get the header to add."""
    header = f"-H 'Content-Type: {MEDIA_TYPES[accepted[0]]}'"
    if media == _FORM:
        # -d @FILE drops a file's newlines: harmless in JSON, not in binary bytes
        binary = not all(codecs.textual(fmt) for fmt in accepted)
        other = ", or another type above with --data-binary @FILE" if binary else ""
        return f"curl -d sends this type unless told otherwise: add {header}{other}"
    other = " (or another type above)" if len(accepted) > 1 else ""
    if media == _MULTIPART:
        return (
            "the body is read as it is sent, not as a form (curl -F): send it with "
            f"--data-binary @FILE and {header}{other}"
        )
    return f"add {header}{other}" if not media else ""


def raw_layout(
    headers: Iterable[tuple[bytes, bytes]], shape: str | None, dtype: str | None
) -> tuple[tuple[int, ...], str]:
    """The shape and dtype of a raw body: from its ``X-Shape`` and ``X-Dtype`` headers or
    the ``shape`` and ``dtype`` parameters (already checked), which must agree when both
    are given; the dtype defaults to float32. 400 for a shape given nowhere, a header that
    is malformed or repeated, or a header and a parameter that disagree."""
    fields: dict[bytes, list[str]] = {b"x-shape": [], b"x-dtype": []}
    for name, value in headers:
        if name in fields:
            fields[name].append(value.decode("latin-1"))
    declared_shape = _declared("X-Shape", fields[b"x-shape"], "shape", shape, raw.parse_shape)
    declared_dtype = _declared("X-Dtype", fields[b"x-dtype"], "dtype", dtype, raw.parse_dtype)
    if declared_shape is None:
        raise MalformedBody(
            f"a raw body ({MEDIA_TYPES['raw']}) needs its shape: send the X-Shape header "
            "(e.g. X-Shape: 8,128,512) or the shape parameter, and X-Dtype or dtype if it "
            f"is not {RAW_DTYPE}"
        )
    return declared_shape, declared_dtype or RAW_DTYPE


_T = TypeVar("_T")


def _declared(
    header: str, values: list[str], name: str, param: str | None, parse: Callable[[str], _T]
) -> _T | None:
    """What the header (given at most once) or the parameter says; both: the same."""
    if len(values) > 1:
        raise MalformedBody(f"{header} is given {len(values)} times; give it once")
    try:
        from_header = parse(values[0]) if values else None
    except ValueError as exc:
        raise MalformedBody(f"{header}: {exc}") from None
    from_param = None if param is None else parse(param)
    if from_header is None:
        return from_param
    if from_param is not None and from_param != from_header:
        raise MalformedBody(
            f"{header} ({shown(values[0].strip())}) and the {name} parameter "
            f"({shown(param or '')}) disagree: give one of them, or the same value"
        )
    return from_header


async def read_posted(
    request: Request, runtime: Runtime, size: Limit, reservation: Reservation
) -> bytearray:
    """:func:`read_body` within the settings' timeouts: ``PE_BODY_TIMEOUT`` of silence,
    ``PE_MIN_READ_RATE`` after ``PE_SEND_TIMEOUT`` of grace."""
    settings = runtime.settings
    return await read_body(
        request,
        size,
        reservation,
        idle_timeout=settings.body_timeout,
        min_rate=settings.min_read_rate,
        grace=settings.send_timeout,
    )


async def read_body(
    request: Request,
    size: Limit,
    reservation: Reservation,
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
    byte now and then keeps no body, and the memory it holds, for ever). The bytes are taken
    from ``reservation`` as they arrive (not as declared: a slow client holds what it has
    sent). A client that leaves is a 499."""
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
                reservation.take(len(chunk))
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

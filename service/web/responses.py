"""Responses: an encoded answer on the wire, a large one holding its permit until it has
been sent; and the whole of a table request (negotiation, limits, validators, 304)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

from service import batches, codecs, handlers
from service.codecs import npz
from service.codecs.types import FORMATS, MEDIA_TYPES, TABLE_FORMATS, Format
from service.encodings import registry
from service.encodings.registry import DType, Key
from service.errors import InvalidParameter, ServiceError
from service.limits import PATIENCE, reserving
from service.runtime import Runtime
from service.web.bodies import body_format, raw_layout, read_posted
from service.web.conditional import IMMUTABLE, fields_etag, matches
from service.web.disconnect import unless_gone
from service.web.negotiation import accepts_gzip, combined, negotiate

_SEND_CHUNK_BYTES: Final = 1 << 20


class PermitResponse(Response):
    """An answer that gives its permit back once it has been sent, or has failed, or as
    soon as its client turns out to be slow: a 1 MiB chunk not taken within
    ``limits.PATIENCE`` seconds. A slow reader keeps no one else waiting for a permit; the
    bytes it holds count against the slow clients' budget instead (:mod:`service.server.pacing`),
    which also cuts off clients that read too slowly."""

    def __init__(
        self, content: bytes | memoryview, headers: dict[str, str], release: Callable[[], None]
    ) -> None:
        super().__init__(content, headers=headers)
        self._release: Callable[[], None] | None = release

    def _give_back(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        try:
            start = {"type": "http.response.start", "status": self.status_code}
            await send({**start, "headers": self.raw_headers})
            body = memoryview(self.body)
            for offset in range(0, max(len(body), 1), _SEND_CHUNK_BYTES):
                chunk = body[offset : offset + _SEND_CHUNK_BYTES]
                more = offset + _SEND_CHUNK_BYTES < len(body)
                slow = loop.call_later(PATIENCE, self._give_back)
                try:
                    await send({"type": "http.response.body", "body": chunk, "more_body": more})
                finally:
                    slow.cancel()
        finally:
            self._give_back()


def respond(runtime: Runtime, answer: handlers.Answer, headers: Mapping[str, str]) -> Response:
    """``answer`` with ``headers`` added."""
    merged = {**headers, **answer.headers}
    if answer.release is not None:
        return PermitResponse(answer.body, merged, answer.release)
    return Response(answer.body, headers=merged)


def table_etag(fields: Mapping[str, Any], fmt: Format, gzip: bool) -> str:
    """A strong validator: a table answer's bytes are a pure function of these values."""
    encoding = "gzip" if gzip else "identity"
    return fields_etag(handlers.TABLE_REVISION, fmt, encoding, fields=dict(fields))


def not_modified(request: Request, headers: dict[str, str]) -> Response | None:
    """A 304 with ``headers`` when ``If-None-Match`` matches their ETag, else None."""
    if matches(combined(request.scope["headers"], b"if-none-match"), headers["etag"]):
        return Response(status_code=304, headers=headers)
    return None


def table_headers(
    request: Request,
    fields: Mapping[str, Any],
    explicit: Format | None,
    chosen: Format,
    elements: int,
) -> tuple[dict[str, str], bool]:
    """The headers of an immutable table-like answer of ``elements`` numbers in ``chosen``
    (``explicit``: the format the query named): its strong ETag, ``immutable``, ``Vary``;
    and whether it is gzipped (JSON, large enough, welcome)."""
    raw = request.scope["headers"]
    gzip = (
        codecs.textual(chosen)
        and elements >= handlers.GZIP_MIN_ELEMENTS
        and accepts_gzip(combined(raw, b"accept-encoding"))
    )
    headers = {"etag": table_etag(fields, chosen, gzip), "cache-control": IMMUTABLE}
    vary = [
        name
        for name, varies in [
            ("Accept", explicit is None),
            ("Accept-Encoding", codecs.textual(chosen)),
        ]
        if varies
    ]
    if vary:
        headers["vary"] = ", ".join(vary)
    return headers, gzip


async def table_response(
    request: Request,
    runtime: Runtime,
    block: handlers.Block,
    fields: Mapping[str, Any],
    fmt: Format | None,
    width_name: str,
    check: Callable[[Format], None] | None = None,
    resource: str = "",
) -> Response:
    """A block of a table in the format asked for (by ``fmt``, else ``Accept``), gzipped
    JSON where welcome, with a strong ETag and ``immutable``; 304 for a current tag. The
    limits are a table's (rows × ``width_name``), or ``check``'s for the format chosen;
    ``resource`` (the route's path) counts in the ETag beside ``fields``."""
    raw = request.scope["headers"]
    offered = FORMATS if registry.arrays(block.key) else TABLE_FORMATS  # npz: named members
    chosen = fmt or negotiate(combined(raw, b"accept"), offered)
    if check is None:
        handlers.check_table(runtime.limits, block, chosen, width_name)
    else:
        check(chosen)
    tagged = {**fields, "resource": resource} if resource else fields
    headers, gzip = table_headers(request, tagged, fmt, chosen, block.elements)
    unchanged = not_modified(request, headers)
    if unchanged is not None:
        return unchanged
    answer = await unless_gone(
        request, lambda: handlers.table(runtime, block, fields, chosen, gzip)
    )
    return respond(runtime, answer, headers)


async def apply_response(
    request: Request,
    runtime: Runtime,
    fmt: Format | None,
    kernel: batches.Kernel,
    key: Callable[[int, DType], Key],
    offset: int,
    max_len: int | None,
    layout: tuple[str | None, str | None] = (None, None),
) -> Response:
    """The whole of an apply request: the body's format (``Content-Type``; a raw body's
    shape and dtype from its headers or ``layout``, the query's), the answer's (``fmt``,
    else ``Accept``, else the body's), the body read within its limits, and the kernel run
    on it in a worker thread, cancelled if the client leaves."""
    raw = request.scope["headers"]
    kind = body_format(combined(raw, b"content-type"))
    declared = raw_layout(raw, *layout) if kind == "raw" else None
    for name, value in zip(("shape", "dtype"), layout, strict=True):
        if value is not None and kind != "raw":
            raise InvalidParameter(name, f"is for a raw body ({MEDIA_TYPES['raw']}) only")
    offered = (kind, *(other for other in FORMATS if other != kind))
    chosen = fmt or negotiate(combined(raw, b"accept"), offered)
    gzip = codecs.textual(chosen) and accepts_gzip(combined(raw, b"accept-encoding"))
    plan = batches.Apply(kind, chosen, gzip, kernel, key, offset, max_len, declared)
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
        # an .npz is held decompressed too (64 KiB of zeros may unpack to 64 MiB): its
        # members count as they are decompressed, what its directory declares only
        # chooses the lane (about four bytes a number in every body format); its
        # directory is read once, here (at most 64 KiB), for the lane and the decoding
        archive = _opened(body) if kind == "npz" else None
        unpacked = npz.unpacked_size(archive) if archive is not None else 0
        elements = (len(body) + unpacked) // 4
        answer = await unless_gone(
            request,
            lambda: runtime.compute(
                elements, batches.apply, runtime, body, plan, reservation.take, archive
            ),
        )
    return respond(runtime, answer, {"cache-control": "no-store"})


def _opened(body: bytearray) -> Any:
    """An ``.npz`` body opened, or None where it is unreadable (decoding says why)."""
    try:
        return npz.opened(body)
    except ServiceError:
        return None

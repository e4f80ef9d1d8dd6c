"""The plans of a table's answer (a block of rows, immutable: a strong ETag over its
fields) and of an apply's (a posted batch run through a kernel), which
:func:`service.web.answers.answer` serves."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request, Response

from service import batches, handlers
from service.codecs import npz
from service.codecs.types import FORMATS, MEDIA_TYPES, Encoded, Format, Headers
from service.encodings import registry
from service.encodings.registry import DType, Key
from service.errors import InvalidParameter, ServiceError
from service.limits import reserving
from service.runtime import Runtime
from service.web.answers import Offer, Plan, answer
from service.web.bodies import body_format, raw_layout, read_posted
from service.web.conditional import fields_etag
from service.web.negotiation import combined


def table_etag(fields: Mapping[str, Any], fmt: Format, gzip: bool) -> str:
    """A strong validator: a table answer's bytes are a pure function of these values."""
    encoding = "gzip" if gzip else "identity"
    return fields_etag(handlers.TABLE_REVISION, fmt, encoding, fields=dict(fields))


async def table_response(
    request: Request,
    runtime: Runtime,
    offer: Offer[Format],
    block: handlers.Block,
    fields: Mapping[str, Any],
    width_name: str,
    check: Callable[[Format], None] | None = None,
    resource: str = "",
) -> Response:
    """A block of a table in a format ``offer`` offers (the query's, else by ``Accept``), gzipped
    JSON where welcome, with a strong ETag and ``immutable``; 304 for a current tag. The
    limits are a table's (rows × ``width_name``), or ``check``'s for the format chosen;
    ``resource`` (the route's path) counts in the ETag beside ``fields``."""
    tagged = {**fields, "resource": resource} if resource else fields

    def limits(fmt: Format) -> None:
        if check is None:
            handlers.check_table(runtime.limits, block, fmt, width_name)
        else:
            check(fmt)

    async def encode(fmt: Format, gzip: bool) -> Encoded:
        return await handlers.table(runtime, block, fields, fmt, gzip)

    plan = Plan(
        offer,
        encode,
        elements=block.elements,
        check=limits,
        large=block.large,
        etag=lambda fmt, gzip: table_etag(tagged, fmt, gzip),
        gzip_from=handlers.GZIP_MIN_ELEMENTS,
        engine=registry.library_engine(block.key),
    )
    return await answer(request, runtime, plan)


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
    offer = Offer(offered, fmt)
    offer.chosen(request)  # an unacceptable answer is refused before the body is read
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
        # an .npz is held decompressed too (64 KiB of zeros may unpack to 64 MiB): its
        # members count as they are decompressed, what its directory declares only
        # chooses the lane (about four bytes a number in every body format); its
        # directory is read once, here (at most 64 KiB), for the lane and the decoding
        archive = _opened(body) if kind == "npz" else None
        unpacked = npz.unpacked_size(archive) if archive is not None else 0
        elements = (len(body) + unpacked) // 4

        async def encode(chosen: Format, gzip: bool) -> tuple[Headers, bytes | memoryview]:
            plan = batches.Apply(kind, chosen, gzip, kernel, key, offset, max_len, declared)
            done = await runtime.compute(
                elements, batches.apply, runtime, body, plan, reservation.take, archive
            )
            return done.headers, done.body

        # a batch's answer is not kept: no-store, and no Vary
        return await answer(request, runtime, Plan(offer, encode, vary=False))


def _opened(body: bytearray) -> Any:
    """An ``.npz`` body opened, or None where it is unreadable (decoding says why)."""
    try:
        return npz.opened(body)
    except ServiceError:
        return None

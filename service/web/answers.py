"""One answer for every endpoint that answers arrays (or a picture of them): a :class:`Plan`
says what the answer is (the formats offered, the numbers it holds and its limits,
whether it is immutable and what its ETag covers, how to encode it), and :func:`answer`
does the rest the same way for all: the format (``format=``, else ``Accept``: 406), the
limits, gzip where welcome, the validators and ``304``, the encoding under a permit for a
large answer, cancelled if the client leaves, and the response, which gives its permit
back once it has been sent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

from service import codecs, handlers
from service.codecs.types import FORMATS, MEDIA_TYPES, Headers
from service.errors import ClientGone
from service.limits import PATIENCE
from service.runtime import Runtime
from service.web.conditional import IMMUTABLE, matches, strong_etag
from service.web.disconnect import unless_gone
from service.web.negotiation import accepts_gzip, combined, preferred

F = TypeVar("F", bound=str)
Body = bytes | memoryview
Encode = Callable[[F, bool], Awaitable[tuple[Headers, Body]]]

# what each format an answer may be in is sent as: the wire formats and a picture
MEDIA: Final[dict[str, str]] = dict(MEDIA_TYPES.items(), png="image/png")
_TEXTUAL: Final = frozenset(fmt for fmt in FORMATS if codecs.textual(fmt))
_SEND_CHUNK_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Offer(Generic[F]):
    """The formats an answer is offered in (the first when ``Accept`` names none of them),
    and the one the request named (its ``format`` parameter; None: ``Accept`` chooses)."""

    formats: tuple[F, ...]
    asked: F | None = None

    def chosen(self, request: Request) -> F:
        """The format to answer in; :class:`service.errors.NotAcceptable` (406) when
        ``Accept`` refuses every one offered. An endpoint that reads a body calls it
        first too: an unacceptable answer is refused before its body is read."""
        if self.asked is not None:
            return self.asked
        accept = combined(request.scope["headers"], b"accept")
        return self.formats[preferred(accept, [MEDIA[fmt] for fmt in self.formats])]


@dataclass(frozen=True, slots=True)
class Plan(Generic[F]):
    """What an answer is, before anything is computed.

    ``encode(fmt, gzip)``: the answer's bytes in the format chosen, gzipped when asked (in
    the lane and thread its work needs), and what its headers say of them
    (``Content-Encoding``, its shape); its ``Content-Type`` is the format's, in
    :data:`MEDIA`, set by :func:`answer` whatever an encoder says.
    ``elements``: the numbers it holds (gzip's threshold and the JSON limit count them).
    ``check(fmt)``: the limits in the format chosen, before anything is computed;
    ``json_hint``: the JSON limit checked against ``elements`` with this hint (None: the
    check does it, or the answer is not a table of numbers). ``large``: it holds one of
    the large-answer permits from its encoding until it has been sent. ``etag(fmt,
    gzip)``: an immutable answer's strong validator (what it covers: its fields, its
    revision, the format and coding), else ``no-store``. ``gzip_from``: the fewest
    elements a JSON answer is gzipped at (None: never). ``vary``: whether a negotiated
    answer says ``Vary: Accept`` (an immutable one says ``Accept-Encoding`` too, where
    gzip may apply). ``headers``: what it says besides (the fields a document's answer
    read). ``engine``: the library engine its numbers depend on
    (:func:`service.encodings.registry.library_engine`), named in ``X-Library-Engine`` and
    counted in its ETag, so that no cache mixes two engines' bytes."""

    offer: Offer[F]
    encode: Encode[F]
    elements: int = 0
    check: Callable[[F], None] | None = None
    json_hint: str | None = None
    large: bool = False
    etag: Callable[[F, bool], str] | None = None
    gzip_from: int | None = 0
    vary: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    engine: str | None = None

    def tag(self, fmt: F, gzip: bool) -> str:
        """The answer's ETag (:attr:`etag`, with the engine where there is one)."""
        assert self.etag is not None
        tag = self.etag(fmt, gzip)
        return tag if self.engine is None else strong_etag(f"{tag}|{self.engine}".encode())


async def answer(request: Request, runtime: Runtime, plan: Plan[F]) -> Response:
    """The answer ``plan`` describes, or a ``304`` for an immutable one whose tag the
    request holds."""
    fmt = plan.offer.chosen(request)
    if plan.check is not None:
        plan.check(fmt)
    textual = fmt in _TEXTUAL
    if textual and plan.json_hint is not None:
        runtime.limits.json_answer(plan.elements, hint=plan.json_hint)
    raw = request.scope["headers"]
    gzip = (
        textual
        and plan.gzip_from is not None
        and plan.elements >= plan.gzip_from
        and accepts_gzip(combined(raw, b"accept-encoding"))
    )
    if plan.etag is not None:
        headers = {"etag": plan.tag(fmt, gzip), "cache-control": IMMUTABLE, **plan.headers}
    else:
        headers = {"cache-control": "no-store", **plan.headers}
    if plan.engine is not None:
        headers["x-library-engine"] = plan.engine
    vary = [
        name
        for name, varies in (
            ("Accept", plan.vary and plan.offer.asked is None),
            ("Accept-Encoding", plan.etag is not None and plan.gzip_from is not None and textual),
        )
        if varies
    ]
    if vary:
        headers["vary"] = ", ".join(vary)
    if plan.etag is not None:
        unchanged = not_modified(request, headers)
        if unchanged is not None:
            return unchanged

    handed: list[Callable[[], None]] = []

    async def encoded() -> handlers.Answer:
        if not plan.large:  # most answers: no permit to take, hand over or give back
            return handlers.Answer(*await plan.encode(fmt, gzip))
        async with handlers.permit(runtime, plan.large) as held:
            said, body = await plan.encode(fmt, gzip)
            release = held.hand_over()
            if release is not None:
                handed.append(release)
            return handlers.Answer(said, body, release)

    try:
        done = await unless_gone(request, encoded)
    except ClientGone:
        # an encoding in a worker thread finishes after its client has gone, and its answer
        # is dropped: the permit it was handed goes back with it
        for release in handed:
            release()
        raise
    return _respond(done, headers, fmt)


def not_modified(request: Request, headers: dict[str, str]) -> Response | None:
    """A 304 with ``headers`` when ``If-None-Match`` matches their ETag, else None."""
    if matches(combined(request.scope["headers"], b"if-none-match"), headers["etag"]):
        return Response(status_code=304, headers=headers)
    return None


def _respond(done: handlers.Answer, headers: Mapping[str, str], fmt: str) -> Response:
    """The encoded answer in ``fmt``, with ``headers``, then its type, then what its
    encoding says; one holding a permit gives it back once it has been sent
    (:class:`PermitResponse`)."""
    # the format's type, where a wire codec states it too: one type, the plan's
    merged = {**headers, "content-type": MEDIA[fmt]}
    merged.update((name, value) for name, value in done.headers.items() if name != "content-type")
    if done.release is not None:
        return PermitResponse(done.body, merged, done.release)
    return Response(done.body, headers=merged)


class PermitResponse(Response):
    """An answer that gives its permit back once it has been sent, or has failed, or as
    soon as its client turns out to be slow: a 1 MiB chunk not taken within
    ``limits.PATIENCE`` seconds. A slow reader keeps no one else waiting for a permit; the
    bytes it holds count against the slow clients' budget instead (:mod:`service.server.pacing`),
    which also cuts off clients that read too slowly."""

    def __init__(self, content: Body, headers: dict[str, str], release: Callable[[], None]) -> None:
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

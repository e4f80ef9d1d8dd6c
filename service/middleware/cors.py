"""Cross-origin reading (CORS, the Fetch standard): which pages of other origins may read
the service's answers, set by ``PE_CORS_ORIGINS``.

One ASGI layer, the outermost, so that every answer gets its headers, however it is made:
replayed from memory, a 304, a problem document, a large answer sent in pieces. What the
layers inside it make (and replay keeps) never depends on the request's ``Origin``.

- ``*`` (the default: the data is public and read-only, and no request carries
  credentials): every answer, whether or not its request has an ``Origin``, says
  ``Access-Control-Allow-Origin: *`` and which of its headers a page may read. The answer
  is then the same for every origin, so any cache may keep one copy for all of them.
- A list of origins: an answer to a request from one of them names it, and every answer
  says ``Vary: Origin``, so that no cache gives one origin's answer to another.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered here: 204 with
what may be sent (methods ``GET``, ``HEAD``, ``POST``; the request headers a client of this
service needs), to be kept for two hours; or a 403 problem document that says what is not
allowed. The telemetry around it counts and logs it as any other request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.text import shown
from service.web.problems import problem

METHODS: Final = ("GET", "HEAD", "POST")
# what a client of this service sends (besides what needs no permission): validators, the
# body's media type and encoding, a raw body's shape and dtype, the inference protocol's
# binary extension
REQUEST_HEADERS: Final = (
    "accept",
    "accept-language",
    "content-encoding",
    "content-language",
    "content-type",
    "if-none-match",
    "inference-header-content-length",
    "x-dtype",
    "x-shape",
)
# what a page may read of an answer, besides what it always may (Content-Type, -Length, ...)
EXPOSED_HEADERS: Final = (
    "Allow",
    "Content-Location",
    "ETag",
    "Inference-Header-Content-Length",
    "Retry-After",
    "X-Config-Fields",
    "X-Dtype",
    "X-Layer-Types",
    "X-Positions",
    "X-Rope-Delta",
    "X-Scale",
    "X-Shape",
)
# seconds a browser may keep a preflight's answer (Chromium keeps it two hours at most)
MAX_AGE: Final = 7200
_EXPOSE: Final = (b"access-control-expose-headers", ", ".join(EXPOSED_HEADERS).encode())
_ANY: Final = (b"access-control-allow-origin", b"*")
_BLANKET: Final = (_ANY, _EXPOSE)


def blanket_headers(origins: frozenset[str] | None) -> tuple[tuple[bytes, bytes], ...]:
    """What every answer carries whatever its request says (every origin may read them):
    a refusal written before a request reaches this layer carries them too."""
    return (_ANY,) if origins is None else ()


def _tokens(value: bytes) -> list[str]:
    return [part.strip().lower() for part in value.decode("latin-1").split(",") if part.strip()]


def _varying(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with ``Origin`` added to their ``Vary`` (or a ``Vary: Origin``)."""
    out, varied = [], False
    for name, value in headers:
        if not varied and name.lower() == b"vary":
            name, value, varied = b"vary", bytes(value) + b", Origin", True
        out.append((name, value))
    if not varied:
        out.append((b"vary", b"Origin"))
    return out


class _BlanketSend:
    """``send`` with the blanket headers added to the answer's start."""

    __slots__ = ("send",)

    def __init__(self, send: Send) -> None:
        self.send = send

    def __call__(self, message: Message) -> Awaitable[None]:
        # no coroutine of its own on the path of every message: the one of ``send``
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *_BLANKET]}
        return self.send(message)


class Cors:
    """ASGI middleware: CORS for every answer of ``app`` and its preflights. ``origins``:
    None lets every origin read, else the origins (scheme://host[:port]) that may."""

    def __init__(self, app: ASGIApp, origins: frozenset[str] | None) -> None:
        self.app = app
        self.origins = origins

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # the coroutine of the layer inside, or of a preflight: none of its own around it
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        origin: bytes | None = None
        if scope["method"] == "OPTIONS" or self.origins is not None:
            fields = {
                name: value
                for name, value in scope["headers"]
                if name in (b"origin", b"access-control-request-method")
            }
            origin = fields.get(b"origin")
            method = fields.get(b"access-control-request-method")
            if scope["method"] == "OPTIONS" and origin is not None and method is not None:
                return self._preflight(scope, receive, send, origin, method)
        if self.origins is None:  # the default: the same headers on every answer
            return self.app(scope, receive, _BlanketSend(send))

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": self.headers(message.get("headers", ()), origin)}
            await send(message)

        return self.app(scope, receive, with_cors)

    def headers(
        self, headers: Iterable[tuple[bytes, bytes]], origin: bytes | None
    ) -> list[tuple[bytes, bytes]]:
        """An answer's ``headers`` with what this layer adds to them for a request from
        ``origin`` (None for one without an ``Origin``)."""
        if self.origins is None:
            return [*headers, *_BLANKET]
        if origin is not None and origin.decode("latin-1").lower() in self.origins:
            return [*_varying(headers), (b"access-control-allow-origin", origin), _EXPOSE]
        return _varying(headers)

    def _refusal(self, origin: bytes, method: str, requested: list[str]) -> str | None:
        """Why a preflight is refused, or None."""
        if self.origins is not None and origin.decode("latin-1").lower() not in self.origins:
            return (
                f"pages of {shown(origin.decode('latin-1'))!r} may not read this service's answers "
                "(PE_CORS_ORIGINS)"
            )
        if method not in METHODS:
            return (
                f"{shown(method)} is not allowed from another origin; allowed: {', '.join(METHODS)}"
            )
        unknown = [name for name in requested if name not in REQUEST_HEADERS]
        if unknown:
            return (
                f"the request headers {shown(', '.join(unknown))} are not allowed from another "
                f"origin; allowed: {', '.join(REQUEST_HEADERS)}"
            )
        return None

    async def _preflight(
        self, scope: Scope, receive: Receive, send: Send, origin: bytes, method: bytes
    ) -> None:
        asked = [
            value for name, value in scope["headers"] if name == b"access-control-request-headers"
        ]
        requested = [token for value in asked for token in _tokens(value)]
        refusal = self._refusal(origin, method.decode("latin-1").strip(), requested)
        vary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
        if refusal is not None:
            answer = problem(403, refusal, headers={"vary": vary})
            await answer(scope, receive, send)
            return
        allowed = b"*" if self.origins is None else origin
        headers = [
            (b"access-control-allow-origin", allowed),
            (b"access-control-allow-methods", ", ".join(METHODS).encode()),
            (b"access-control-allow-headers", ", ".join(REQUEST_HEADERS).encode()),
            (b"access-control-max-age", str(MAX_AGE).encode()),
            (b"vary", vary.encode()),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

"""Direct answers: what the middleware stack answers a repeated immutable ``GET`` or
``HEAD``, made by one plain function that the protocol calls as soon as the request's head
is read, without ASGI.

The stack (:class:`service.app.ServiceApp`) answers such a request from replay's memory,
before the framework; what was left of its cost was the ASGI machinery around the replay: a
task for the request, its messages through each layer's ``send``, uvicorn's checks of every
header of the answer, the pacing's state for it. A replayed 8-row slice spent about two
thirds of its time there (docs/performance.md). Here the same answer is made by the same
functions (:meth:`Replay.recall` and :meth:`Replayable.reply`, :meth:`Cors.headers`) and
counted and logged by the same telemetry (:meth:`TelemetryMiddleware.record`); the protocol
writes it (:mod:`service.server.protocol`).

Only what replay would answer from its memory, alone, is answered here; the protocol sends
the rest through the stack (a request that has a body, ``Expect``, a proxy's
``X-Forwarded-*`` fields that the server reads into the client's address, one that is not
kept-alive HTTP/1.1, one behind an answer still being sent, an answer larger than one write
or not framed by its ``Content-Length`` alone).

One difference is kept: a request answered here is answered before the next request of the
same read is parsed, so where that one is malformed (a 400, 414 or 431 that closes the
connection), the client gets both answers; the stack, whose answer would still be under
way, drops the first for the refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from service.middleware.cors import Cors
from service.middleware.replay import READ, Replay
from service.middleware.telemetry import TelemetryMiddleware

Headers = list[tuple[bytes, bytes]]
# writes an answer (status, headers, body) on the connection
Write = Callable[[int, Headers, bytes], None]

_ORIGIN: Final = b"origin"
_READ_HERE: Final = READ | {_ORIGIN}
# what a request answered here may not carry: a body, or what the server reads elsewhere
_DECLINED: Final = frozenset(
    {b"content-length", b"transfer-encoding", b"expect", b"x-forwarded-for", b"x-forwarded-proto"}
)


class Direct:
    """The answer of the stack to a replayed request, without ASGI. ``largest``: the most
    bytes an answer kept may count to be answered here (one write of the protocol's)."""

    def __init__(
        self,
        replay: Replay,
        cors: Cors | None,
        telemetry: TelemetryMiddleware,
        largest: int,
    ) -> None:
        self.replay = replay
        self.cors = cors
        self.telemetry = telemetry
        self.largest = largest

    def __call__(
        self,
        method: str,
        path: str,
        query: bytes,
        headers: Headers,
        client: tuple[str, int] | None,
        write: Write,
    ) -> bool:
        """Answer a ``GET`` or ``HEAD`` of ``path?query`` with these headers through
        ``write``, and count and log it; False, having written nothing, if the stack must
        answer it."""
        start = time.perf_counter()
        found: dict[bytes, list[bytes]] = {}
        origin: bytes | None = None
        for name, value in headers:
            if name in _READ_HERE:
                if name == _ORIGIN:
                    origin = value  # the last one, as CORS reads it
                else:
                    found.setdefault(name, []).append(value)
            elif name in _DECLINED:
                return False
        # each field combined as negotiation and replay read it
        fields = {name: b", ".join(values).decode("latin-1") for name, values in found.items()}
        kept = self.replay.recall(path, query, fields, self.largest)
        if kept is None or not kept.framed:
            return False
        status, answer, body = kept.reply(fields.get(b"if-none-match"), method == "HEAD")
        if self.cors is not None:
            answer = self.cors.headers(answer, origin)
        write(status, answer, body)
        scope = {
            "method": method,
            "path": path,
            "query_string": query,
            "client": client,
            "route": kept.route,
        }
        self.telemetry.record(scope, status, len(body), time.perf_counter() - start)
        return True

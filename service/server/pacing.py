"""Every answer paced by its client's reading, so that no client can make the service hold
an answer, or a permit, for long by reading it slowly or not at all.

An answer is written in pieces that fill the transport's buffer up to ``BUFFERED_BYTES``
(at least ``PIECE_BYTES``); the next waits while it holds more (uvicorn would write a whole
body into the transport's buffer at once, and keep it there for as long as the client does
not read). What the buffer still holds when the answer is written must be taken by the
answer's deadline, or the connection is cut off then.

- **Minimum read rate.** After ``PE_SEND_TIMEOUT`` seconds of grace, the client must have
  taken the answer at ``PE_MIN_READ_RATE`` bytes a second: the piece that ends at byte
  ``b`` is taken by ``start + PE_SEND_TIMEOUT + b / PE_MIN_READ_RATE``, or the client is
  cut off. A client that never reads is cut off after about the grace, whatever the size.
- **Slow clients share a bounded budget.** A client that leaves a piece untaken for
  ``PATIENCE`` seconds is slow: its whole answer (which the service holds until it has
  been sent) counts against ``PE_SLOW_CLIENT_BYTES``, shared by every slow client, while
  it is written. A slow client that does not fit in it is cut off at once. (A large
  answer also gives back its permit when its client turns out to be slow:
  ``web.answers.PermitResponse``.)

Cut off means: the connection is aborted (the bytes buffered for it are dropped at once),
one WARNING line says who and why, and the request is counted as 499 (``CUT_OFF`` in its
scope) by the telemetry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final, cast

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from service.limits import PATIENCE
from service.middleware.telemetry import CUT_OFF
from service.server.edge import Edge
from service.text import printable

PIECE_BYTES: Final = 256 << 10
# bytes a transport may hold for its client: a piece fills it up to this (one write for
# an answer of up to 2 MiB: writing one answer in several pieces cost a quarter of the
# throughput of cached 1 MiB answers), and the next piece waits while it holds more
BUFFERED_BYTES: Final = 2 << 20

log = logging.getLogger(__name__)


def limit_buffer(transport: asyncio.Transport) -> None:
    """A connection's transport pauses writing above ``BUFFERED_BYTES`` (and resumes below
    a quarter of it), where asyncio's default is 64 KiB: the pieces of an answer keep the
    kernel busy while the next waits."""
    transport.set_write_buffer_limits(high=BUFFERED_BYTES)


class BytesWritten:
    """The bytes written to one connection, all its answers together."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = 0


class Pacer:
    """The pacing of one answer: when it started, its size, the bytes written so far and
    the bytes it holds of the slow clients' budget."""

    __slots__ = ("budget", "connection", "grace", "headers", "held", "rate", "sent", "started")

    def __init__(self, connection: BytesWritten, edge: Edge) -> None:
        self.connection = connection
        self.grace = edge.settings.send_timeout
        self.rate = edge.settings.min_read_rate
        self.budget = edge.slow_clients
        self.started = 0.0
        self.headers: Any = ()
        self.sent = 0
        self.held = 0

    def start(self, message: ASGISendEvent) -> None:
        """The answer starts: the clock starts (its size is read when it is needed)."""
        self.started = asyncio.get_running_loop().time()
        event: dict[str, Any] = message  # type: ignore[assignment]  # no call: every answer's path
        self.headers = event.get("headers", ())

    @property
    def size(self) -> int:
        """The answer's size, its ``Content-Length`` (0 where it has none)."""
        for name, value in self.headers:
            if name.lower() == b"content-length":
                return int(value)
        return 0

    async def write(self, cycle: RequestResponseCycle, message: ASGISendEvent) -> None:
        """Write a body message in pieces, each once the one before it has been taken."""
        event: dict[str, Any] = message  # type: ignore[assignment]  # no call: every answer's path
        body = event.get("body", b"")
        if len(body) <= PIECE_BYTES and not event.get("more_body", False):
            # the whole of a small answer: one write, then its deadline (most answers)
            await RequestResponseCycle.send(cycle, message)
            self.sent += len(body)
            self.connection.written += len(body)
            self._watch(cycle.transport, cycle.scope)
            self.finish()  # what an earlier message of it held
            return
        try:
            await self._write(cycle, message)
        finally:
            self.finish()

    async def _write(self, cycle: RequestResponseCycle, message: ASGISendEvent) -> None:
        event = cast(dict[str, Any], message)
        body = event.get("body", b"")
        more = event.get("more_body", False)
        room = BUFFERED_BYTES - cycle.transport.get_write_buffer_size()
        if len(body) <= max(PIECE_BYTES, room):
            await self._piece(cycle, message, len(body), done=not more)
            return
        view = memoryview(body)
        offset = 0
        while offset < len(view) and not cycle.disconnected:
            room = BUFFERED_BYTES - cycle.transport.get_write_buffer_size()
            piece = view[offset : offset + max(PIECE_BYTES, room)]
            offset += len(piece)
            last = offset >= len(view)
            part = {"type": "http.response.body", "body": piece, "more_body": more or not last}
            await self._piece(cycle, cast(ASGISendEvent, part), len(piece), done=last and not more)

    async def _piece(
        self, cycle: RequestResponseCycle, message: ASGISendEvent, size: int, *, done: bool
    ) -> None:
        """Write one piece; then wait while the transport holds too much (not after the
        answer's last piece: a timer keeps its deadline instead, :meth:`_watch`)."""
        await RequestResponseCycle.send(cycle, message)
        self.sent += size
        self.connection.written += size
        if done:
            self._watch(cycle.transport, cycle.scope)
        else:
            await self._drain(cycle)

    def written(self, transport: asyncio.Transport, scope: Any, size: int) -> None:
        """A whole answer of ``size`` bytes was written at once, outside ASGI (by the
        protocol: :mod:`service.middleware.direct`); it has its deadline as any other."""
        self.started = asyncio.get_running_loop().time()
        self.sent = size
        self.connection.written += size
        self._watch(transport, scope)

    def _watch(self, transport: asyncio.Transport, scope: Any) -> None:
        """The answer is written; what the transport still holds of it must be taken by
        its deadline, or the connection is cut off then."""
        if transport.get_write_buffer_size() == 0:
            return
        end, connection = self.connection.written, self.connection
        deadline = self.started + self.grace + self.sent / self.rate

        def check() -> None:
            if transport.is_closing():
                return
            taken = connection.written - transport.get_write_buffer_size()
            if taken < end:
                self._report(
                    scope,
                    taken - (end - self.sent),
                    f"it read slower than PE_MIN_READ_RATE ({self.rate} bytes/s)",
                )
                transport.abort()

        asyncio.get_running_loop().call_at(deadline, check)

    def finish(self) -> None:
        """The message is written, or the answer cut off: give back what it held."""
        if self.held:
            self.budget.give(self.held)
            self.held = 0

    async def _drain(self, cycle: RequestResponseCycle) -> None:
        """While the transport holds more than ``BUFFERED_BYTES`` (its writing is paused:
        :func:`limit_buffer`), wait for it to hand them to the kernel: until the deadline of
        the minimum read rate, and marking the client slow past ``PATIENCE``. (uvicorn would
        wait for as long as it takes before its next write.)"""
        if not cycle.flow.write_paused or cycle.disconnected:
            return
        loop = asyncio.get_running_loop()
        patience = loop.time() + PATIENCE
        deadline = self.started + self.grace + self.sent / self.rate
        while cycle.flow.write_paused and not cycle.disconnected:
            now = loop.time()
            if now >= deadline:
                self._cut(cycle, f"it read slower than PE_MIN_READ_RATE ({self.rate} bytes/s)")
                return
            if not self.held and now >= patience:
                size = max(self.size, self.sent)
                if not self.budget.take(size):
                    limit = self.budget.limit
                    self._cut(cycle, f"it is slow and PE_SLOW_CLIENT_BYTES ({limit}) is full")
                    return
                self.held = size
            try:
                async with asyncio.timeout_at(deadline if self.held else min(deadline, patience)):
                    await cycle.flow.drain()
            except TimeoutError:
                pass

    def _cut(self, cycle: RequestResponseCycle, why: str) -> None:
        scope = cycle.scope
        self._report(scope, self.sent - cycle.transport.get_write_buffer_size(), why)
        cast(dict[str, Any], scope)[CUT_OFF] = True
        cycle.disconnected = True
        cycle.transport.abort()
        self.finish()

    def _report(self, scope: Any, taken: int, why: str) -> None:
        """One WARNING line: who was cut off, from what, how far it had read, and why."""
        client = scope.get("client")
        log.warning(
            "Cut off %s: %s %s took %d of %d bytes in %.1f s: %s",
            f"{client[0]}:{client[1]}" if client else "a client",
            scope["method"],
            printable(scope["path"]),
            taken,
            max(self.size, self.sent),
            asyncio.get_running_loop().time() - self.started,
            why,
        )

"""Every answer paced by its client's reading, so that no client can make the service hold
an answer, or a permit, for long by reading it slowly or not at all.

An answer is written in pieces of ``PIECE_BYTES``, each once the transport has handed the
one before it to the kernel (uvicorn would write a whole body into the transport's buffer
at once, and keep it there for as long as the client does not read).

- **Minimum read rate.** After ``PE_SEND_TIMEOUT`` seconds of grace, the client must have
  taken the answer at ``PE_MIN_READ_RATE`` bytes a second: the piece that ends at byte
  ``b`` is taken by ``start + PE_SEND_TIMEOUT + b / PE_MIN_READ_RATE``, or the client is
  cut off. A client that never reads is cut off after about the grace, whatever the size.
- **Slow clients share a bounded budget.** A client that leaves a piece untaken for
  ``PATIENCE`` seconds is slow: its whole answer (which the service holds until it has
  been sent) counts against ``PE_SLOW_CLIENT_BYTES``, shared by every slow client, while
  it is written. A slow client that does not fit in it is cut off at once. (A large
  answer also gives back its permit when its client turns out to be slow:
  ``web.responses.PermitResponse``.)

Cut off means: the connection is aborted (the bytes buffered for it are dropped at once),
one WARNING line says who and why, and the request is counted as 499 (``CUT_OFF`` in its
scope) by the telemetry.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Final, cast

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from service.settings import Settings
from service.telemetry import CUT_OFF, printable

PIECE_BYTES: Final = 256 << 10
# a piece left untaken this long makes its client a slow one
PATIENCE: Final = 2.0

log = logging.getLogger(__name__)


@functools.cache
def settings() -> Settings:
    """The ``PE_*`` settings, read once a process: uvicorn makes the protocol (and so the
    pacing) from its own configuration, so the app's settings do not reach it."""
    return Settings()


class SlowBudget:
    """Bytes of answers held for slow clients, in total, at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


@functools.cache
def slow_budget() -> SlowBudget:
    """The process's budget for slow clients (``PE_SLOW_CLIENT_BYTES``)."""
    return SlowBudget(settings().slow_client_bytes)


class Pacer:
    """The pacing of one answer: when it started, its size, the bytes written so far and
    the bytes it holds of the slow clients' budget."""

    __slots__ = ("budget", "grace", "held", "rate", "sent", "size", "started")

    def __init__(self) -> None:
        chosen = settings()
        self.grace = chosen.send_timeout
        self.rate = chosen.min_read_rate
        self.budget = slow_budget()
        self.started = 0.0
        self.size = 0
        self.sent = 0
        self.held = 0

    def start(self, message: ASGISendEvent) -> None:
        """The answer starts: the clock starts, and its size is its ``Content-Length``."""
        self.started = asyncio.get_running_loop().time()
        for name, value in cast(dict[str, Any], message).get("headers", ()):
            if name.lower() == b"content-length":
                self.size = int(value)

    async def write(self, cycle: RequestResponseCycle, message: ASGISendEvent) -> None:
        """Write a body message in pieces, each once the one before it has been taken."""
        try:
            await self._write(cycle, message)
        finally:
            self.finish()

    async def _write(self, cycle: RequestResponseCycle, message: ASGISendEvent) -> None:
        event = cast(dict[str, Any], message)
        body = event.get("body", b"")
        if len(body) <= PIECE_BYTES:
            await RequestResponseCycle.send(cycle, message)
            self.sent += len(body)
            await self._drain(cycle)
            return
        more = event.get("more_body", False)
        view = memoryview(body)
        for offset in range(0, len(view), PIECE_BYTES):
            if cycle.disconnected:
                return
            piece = view[offset : offset + PIECE_BYTES]
            last = offset + PIECE_BYTES >= len(view)
            part = {"type": "http.response.body", "body": piece, "more_body": more or not last}
            await RequestResponseCycle.send(cycle, cast(ASGISendEvent, part))
            self.sent += len(piece)
            await self._drain(cycle)

    def finish(self) -> None:
        """The message is written, or the answer cut off: give back what it held."""
        if self.held:
            self.budget.give(self.held)
            self.held = 0

    async def _drain(self, cycle: RequestResponseCycle) -> None:
        """Wait until the transport has handed what was written to the kernel: until the
        deadline of the minimum read rate, and marking the client slow past ``PATIENCE``."""
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
        client = scope.get("client")
        elapsed = asyncio.get_running_loop().time() - self.started
        log.warning(
            "Cut off %s: %s %s took %d of %d bytes in %.1f s: %s",
            f"{client[0]}:{client[1]}" if client else "a client",
            scope["method"],
            printable(scope["path"]),
            self.sent - cycle.transport.get_write_buffer_size(),
            max(self.size, self.sent),
            elapsed,
            why,
        )
        cast(dict[str, Any], scope)[CUT_OFF] = True
        cycle.disconnected = True
        cycle.transport.abort()
        self.finish()

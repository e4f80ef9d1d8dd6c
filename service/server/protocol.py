"""uvicorn's httptools protocol, bounded against hostile clients. Each refusal is a problem
document, sent before more of the request is buffered, and closes the connection:

- a request line past 8 KiB is refused with 414 and a head past 32 KiB with 431 (uvicorn's
  h11 protocol has such a bound; httptools has none);
- a head must be complete within ``PE_HEAD_TIMEOUT`` seconds of the connection, or of its
  first byte on a kept-alive connection (the idle time before it is uvicorn's keep-alive
  timeout), else 408: uvicorn would wait for it for ever;
- a request httptools cannot parse gets a 400 that says what is wrong with it.

A request that the app's middleware stack would answer from replay's memory alone is answered
here as soon as its head is read, by the stack's own functions without ASGI
(:mod:`service.middleware.direct`). Every answer is paced by its client's reading
(:mod:`service.server.pacing`). And an answer given
before its request's body has all arrived (413, the body's 408, a refused parameter) closes
the connection after it, instead of reading the rest of the body at the client's pace.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Coroutine
from typing import Any, Final, cast
from urllib.parse import unquote

import httptools
import orjson
from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from service.metrics import REFUSED
from service.server.edge import edge_of
from service.server.pacing import BUFFERED_BYTES, BytesWritten, Pacer, limit_buffer
from service.text import printable, shown

MAX_TARGET_BYTES: Final = 8 << 10
MAX_HEAD_BYTES: Final = 32 << 10
# requests of one read answered without ASGI at most (and no more once BUFFERED_BYTES have
# been written for them): the rest of a read of many pipelined requests goes through the
# stack, which takes turns with other connections (a read of 64 KiB holds some thousand
# small requests, tens of milliseconds of the event loop)
DIRECT_IN_A_READ: Final = 16
# after an early answer, how long the rest of a body is read and dropped (so that a client
# still sending sees the answer, not a reset) before the connection is closed
LINGER_SECONDS: Final = 2.0
_REASONS: Final = {
    400: b"Bad Request",
    408: b"Request Timeout",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
}


class _Refused(Exception):
    pass


class _Lingering:
    """The transport, as the cycle of an early answer sees it: its ``close`` half-closes
    and lingers instead."""

    def __init__(self, protocol: BoundedHttpToolsProtocol) -> None:
        self._protocol = protocol
        self._transport = protocol.transport

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def close(self) -> None:
        self._protocol._close_after_answer()


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = True
        self._head_bytes = 0
        self._header_bytes = 0  # the head's fields parsed so far, within one read too
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = 0.0  # when the head being read began to arrive
        self._body_open = False
        self._dropping = False  # the connection is closing: what arrives is not parsed
        self._refusal: tuple[int, str] | None = None
        self._direct = False  # the request being read was answered without ASGI
        self._direct_in_read = 0  # how many requests of the last read were
        self._direct_bytes_in_read = 0  # and the bytes written for them
        self._begun = False  # a request's head has begun on this connection
        self._target = ("", "")  # its method and path
        self._written = BytesWritten()
        self._edge = edge_of(self.app)  # the app's settings, not a second reading

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limit_buffer(transport)
        super().connection_made(transport)
        self._head_started = self.loop.time()
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._dropping:
            return
        self._direct_in_read = self._direct_bytes_in_read = 0
        if self._head_open and self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
            return
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as error:
            self._refuse(*(self._refusal or (400, self._malformed(error))))
            return
        if self._head_open:
            self._head_bytes += len(data)

    def _malformed(self, error: httptools.HttpParserError) -> str:
        cause = error.__context__ if isinstance(error, httptools.HttpParserCallbackError) else error
        known = isinstance(cause, httptools.HttpParserError)
        said = shown(printable(str(cause)), 200) if known else "?"
        detail = f"the request is not valid HTTP/1.1: {said}"
        # a failure of a callback of ours or uvicorn's is a bug: its traceback is logged
        self.logger.warning("Invalid HTTP request received: %s", detail, exc_info=not known)
        return detail

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._direct = False
        # an earlier answer made directly armed the keep-alive timer: this request is read
        self._unset_keepalive_if_required()
        self._head_open = True
        self._head_bytes = self._header_bytes = 0
        if self._begun:  # a later request's head: its clock starts now
            self._head_started = self.loop.time()
        self._begun = True
        self._start_head_timer()  # on a new connection it runs already, from the connect

    def on_header(self, name: bytes, value: bytes) -> None:
        # a head that arrives in one read is refused here, as one that arrives in several
        # is before the next read
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > MAX_HEAD_BYTES:
            self._refusal = (431, f"the request head is over {MAX_HEAD_BYTES} bytes")
            raise _Refused
        super().on_header(name, value)

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > MAX_TARGET_BYTES:
            self._refusal = (414, f"the request target is over {MAX_TARGET_BYTES} bytes")
            raise _Refused
        super().on_url(url)

    def on_headers_complete(self) -> None:
        self._head_open = False  # the timer, if it fires, finds no head open
        self._body_open = True
        if self._answered_directly():
            return
        super().on_headers_complete()
        self._instrument(self.cycle)

    def on_body(self, body: bytes) -> None:
        if not self._direct:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_open = False
        if not self._direct:
            super().on_message_complete()

    def _answered_directly(self) -> bool:
        """Whether the app's stack answered the request whose head was read as it would
        replay it, without ASGI (:mod:`service.middleware.direct`), on a connection with
        nothing else under way; the answer is then complete, as a cycle's would be."""
        direct = self._edge.direct
        cycle = self.cycle
        if (
            direct is None
            or self._direct_in_read >= DIRECT_IN_A_READ
            or self._direct_bytes_in_read >= BUFFERED_BYTES
            or self.limit_concurrency is not None  # uvicorn's 503s are the stack's
            or (cycle is not None and not cycle.response_complete)
            or self.pipeline
            or self.flow.write_paused
            or self.transport.get_write_buffer_size()
            or self.parser.get_http_version() != "1.1"
            or not self.parser.should_keep_alive()
            or self.parser.should_upgrade()
        ):
            return False
        method = self.parser.get_method()
        if method != b"GET" and method != b"HEAD":
            return False
        try:  # as uvicorn reads the target (a target it cannot read is its to refuse)
            url = httptools.parse_url(self.url)
            if url.path is None:
                return False
            path = url.path.decode("ascii")
        except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
            return False
        if "%" in path:
            path = unquote(path)
        self._target = (method.decode(), self.root_path + path)
        self._direct = direct(
            *self._target,
            url.query or b"",
            self.headers,
            self.client,
            self._write_directly,
        )
        self._direct_in_read += self._direct
        return self._direct

    def _write_directly(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """Write a whole answer made without ASGI, paced as any (one write, then its
        deadline), and end it as a cycle ends its answer."""
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.append(name + b": " + value + b"\r\n")
        for name, value in headers:
            head.append(name + b": " + value + b"\r\n")
        head.append(b"\r\n")
        data = b"".join(head) + body
        self.transport.write(data)
        self._direct_bytes_in_read += len(data)
        if self.transport.get_write_buffer_size():
            method, path = self._target
            scope = {"method": method, "path": path, "client": self.client}
            pacer = Pacer(self._written, self._edge)
            pacer.headers = headers  # its size, for the warning if it is cut off
            pacer.written(self.transport, scope, len(body))
        else:
            self._written.written += len(body)
        self.on_response_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._dropping and not self.transport.is_closing():  # lingering: see below
            self._unset_keepalive_if_required()
            self.timeout_keep_alive_task = self.loop.call_later(
                LINGER_SECONDS, self.timeout_keep_alive_handler
            )

    def _instrument(self, cycle: RequestResponseCycle) -> None:
        """The cycle's answer is paced by its client's reading (:mod:`service.server.pacing`).
        An answer that starts before its request's body has all arrived says
        ``Connection: close`` (so the client sends nothing more on this connection), and
        the close that follows it lingers (:meth:`_close_after_answer`)."""
        # the cycle only by a weak reference: a cycle that held a function holding it would
        # be freed by the garbage collector, not when done (a pause every few hundred
        # requests: p99 of a cached slice 4 -> 30 ms)
        this = weakref.ref(cycle)
        pacer = Pacer(self._written, self._edge)

        # no coroutine of its own on the path of every message: the one it hands on to
        def send(message: ASGISendEvent) -> Coroutine[Any, Any, None]:
            current = this()
            assert current is not None  # its own send is running
            kind = message["type"]
            if kind == "http.response.body" and current.response_started:
                return pacer.write(current, message)
            if kind == "http.response.start":
                if self._body_open and current is self.cycle:
                    current.keep_alive = False  # uvicorn writes Connection: close, then closes
                    current.transport = cast(asyncio.Transport, _Lingering(self))
                pacer.start(message)
            return RequestResponseCycle.send(current, message)

        cycle.send = send  # type: ignore[method-assign]

    # Timeouts: one timer a connection, not one a request (arming and cancelling a timer
    # for every head cost a cached slice about a tenth of its throughput). It fires at the
    # open head's deadline, or finds the head read and sleeps until the next one begins.
    def _start_head_timer(self) -> None:
        if self._head_timer is None:
            deadline = self._head_started + self._edge.settings.head_timeout
            self._head_timer = self.loop.call_at(deadline, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._head_open or self.transport.is_closing():
            return
        timeout = self._edge.settings.head_timeout
        if self.loop.time() < self._head_started + timeout:  # a later head: its own deadline
            self._start_head_timer()
            return
        self._refuse(
            408, f"the request head was not complete within {timeout:g} s (PE_HEAD_TIMEOUT)"
        )

    # Closing
    def _close_after_answer(self) -> None:
        """Half-close, then drop what still arrives for a moment before closing (uvicorn's
        keep-alive timer, armed for ``LINGER_SECONDS`` once the answer is complete):
        closing with unread bytes would reset the connection, and could lose the answer."""
        self._dropping = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def _refuse(self, status: int, detail: str) -> None:
        """Answer ``status`` with a problem document and close the connection; if the answer
        to an earlier request is being sent, let it finish, then close."""
        self._dropping = True
        REFUSED.labels(str(status)).inc()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started:
                cycle.keep_alive = False
                return
            cycle.disconnected = True  # the app's answer would follow ours: it is dropped
        body = orjson.dumps(
            {
                "type": "about:blank",
                "title": _REASONS[status].decode(),
                "status": status,
                "detail": detail,
            }
        )
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
        for name, value in self.server_state.default_headers:
            head.append(name + b": " + value + b"\r\n")
        head.append(b"content-type: application/problem+json\r\n")
        for name, value in self._edge.refusal_headers:  # as every answer of the app's
            head.append(name + b": " + value + b"\r\n")
        head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()

"""uvicorn's httptools protocol with bounds on a request's head: a request line past
8 KiB is refused with 414 and a head past 32 KiB with 431, as problem documents, before
more of it is buffered. (uvicorn's h11 protocol has such a bound; httptools has none.)"""

from __future__ import annotations

from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_TARGET_BYTES = 8 << 10
MAX_HEAD_BYTES = 32 << 10
_REASONS = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


class _Refused(Exception):
    pass


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = True
        self._head_bytes = 0
        self._refusal: tuple[int, str] | None = None

    def data_received(self, data: bytes) -> None:
        if self._head_open and self._head_bytes > MAX_HEAD_BYTES:
            self._send_problem(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
            return
        super().data_received(data)
        if self._head_open:
            self._head_bytes += len(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open = True
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > MAX_TARGET_BYTES:
            self._refusal = (414, f"the request target is over {MAX_TARGET_BYTES} bytes")
            raise _Refused
        super().on_url(url)

    def on_headers_complete(self) -> None:
        self._head_open = False
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
        else:
            self._send_problem(*self._refusal)

    def _send_problem(self, status: int, detail: str) -> None:
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
        head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()

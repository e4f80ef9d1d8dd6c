"""Hot responses: table answers replayed from memory.

A table answer is a pure function of the query string and the ``Accept`` and
``Accept-Encoding`` headers, so once it has been encoded its bytes and headers can answer
the same request again without validation, routing, slicing or encoding. They are kept in
the table cache, under its budget and in its LRU order. Only ``200`` answers are kept;
errors always take the full path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.cache import TableCache
from service.routes import TABLE_PATH, matches

_KEEP_HEADERS = (b"etag", b"cache-control", b"vary")  # what a 304 repeats
_ROUTE = SimpleNamespace(path=TABLE_PATH)  # labels metrics and logs like the full path


@dataclass(frozen=True, slots=True)
class HotResponse:
    headers: list[tuple[bytes, bytes]]
    body: bytes
    etag: str

    @property
    def nbytes(self) -> int:
        return len(self.body) + sum(len(k) + len(v) for k, v in self.headers) + 200


Record = Callable[[Scope, int, int, float], None]


class HotResponses:
    """ASGI middleware: answers repeated table requests from :class:`HotResponse` s.

    It is the outermost layer, so a replayed answer reports itself to ``record``
    (telemetry: status, bytes, seconds) instead of passing through another wrapper."""

    def __init__(
        self,
        app: ASGIApp,
        cache: Callable[[], TableCache],
        record: Record,
        max_body_bytes: int = 8 << 20,
    ) -> None:
        self.app = app
        self.cache = cache
        self.record = record
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != TABLE_PATH or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        accept = encoding = if_none_match = b""
        for name, value in scope["headers"]:
            if name == b"accept":
                accept = value
            elif name == b"accept-encoding":
                encoding = value
            elif name == b"if-none-match":
                if_none_match = value
        key = ("response", scope["query_string"], accept, encoding)
        cache = self.cache()
        hot = cache.recall(key)
        if isinstance(hot, HotResponse):
            start = time.perf_counter()
            scope["route"] = _ROUTE
            status, size = await self._replay(hot, if_none_match, send)
            self.record(scope, status, size, time.perf_counter() - start)
            return
        await self._record(scope, receive, send, cache, key)

    async def _replay(self, hot: HotResponse, if_none_match: bytes, send: Send) -> tuple[int, int]:
        if if_none_match and matches(if_none_match.decode("latin-1"), hot.etag):
            headers = [(k, v) for k, v in hot.headers if k in _KEEP_HEADERS]
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return 304, 0
        await send({"type": "http.response.start", "status": 200, "headers": hot.headers})
        await send({"type": "http.response.body", "body": hot.body})
        return 200, len(hot.body)

    async def _record(
        self, scope: Scope, receive: Receive, send: Send, cache: TableCache, key: object
    ) -> None:
        start: Message | None = None
        parts: list[bytes] = []
        size = 0

        async def keep(message: Message) -> None:
            nonlocal start, size
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body" and start and start["status"] == 200:
                body = message.get("body", b"")
                size += len(body)
                if size <= self.max_body_bytes:  # a larger answer is not kept: no copy
                    parts.append(bytes(body))
                    if not message.get("more_body", False):
                        self._keep(cache, key, start, b"".join(parts))
            await send(message)

        await self.app(scope, receive, keep)

    def _keep(self, cache: TableCache, key: object, start: Message, body: bytes) -> None:
        headers = [(bytes(k), bytes(v)) for k, v in start["headers"]]
        etag = next((v.decode("latin-1") for k, v in headers if k == b"etag"), None)
        if etag is None or len(body) > self.max_body_bytes:
            return
        cache.remember(key, HotResponse(headers, body, etag))

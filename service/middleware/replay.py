"""Replay: any answer that says it never changes is answered again from memory.

An answer is replayable when it is a ``200`` to a ``GET`` with ``immutable`` in its
``Cache-Control`` and a strong ``ETag``, varying on nothing but ``Accept`` and
``Accept-Encoding``: it is then a pure function of the path, the query string and those two
headers (each read as one combined value, as negotiation reads them), so its bytes and
headers can answer the same request again without routing, validation or encoding. Answers
are kept in the cache, in its budget and LRU order; ``If-None-Match`` is answered here too.
A ``HEAD`` is answered from what a ``GET`` kept (its headers alone), and keeps nothing.
Errors and anything else always take the full path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.cache import Cache
from service.web.conditional import matches
from service.web.negotiation import combined, combined_fields

_KEEP_HEADERS: Final = (b"etag", b"cache-control", b"vary")  # what a 304 repeats
_KEYED: Final = {"accept", "accept-encoding"}
# the request's headers a replayed answer depends on
READ: Final = frozenset({b"accept", b"accept-encoding", b"if-none-match"})
_OVERHEAD_BYTES: Final = 512  # the entry, its key and its header list, roughly
# longer Accept / Accept-Encoding values are answered but not kept: no client needs them,
# and each distinct one would keep another copy of an answer under a key as long
MAX_KEYED_BYTES: Final = 512


@dataclass(frozen=True, slots=True)
class Replayable:
    """An answer to replay: its headers and body, its tag, and its route (for telemetry)."""

    headers: list[tuple[bytes, bytes]]
    body: bytes
    etag: str
    route: SimpleNamespace
    # framed by its Content-Length alone (no Transfer-Encoding, no Connection): what the
    # protocol may write as it is, without ASGI
    framed: bool = False

    def reply(
        self, if_none_match: str | None, head: bool
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body of the answer to a request with this
        ``If-None-Match`` (None if it has none): a 304 with what it repeats, or the
        answer (for a ``HEAD``, its headers alone)."""
        if if_none_match is not None and matches(if_none_match, self.etag):
            return 304, [(k, v) for k, v in self.headers if k in _KEEP_HEADERS], b""
        return 200, self.headers, b"" if head else self.body


def replay_key(path: str, query: bytes, fields: dict[bytes, str]) -> tuple[object, ...] | None:
    """The key a request's answer is kept under, from its path, query string and
    :data:`READ` headers; None for one that is not kept (too long a keyed header)."""
    accept, encoding = fields.get(b"accept"), fields.get(b"accept-encoding")
    if len(accept or "") > MAX_KEYED_BYTES or len(encoding or "") > MAX_KEYED_BYTES:
        return None
    return ("replay", path, query, accept, encoding)


def _replayable(message: Message) -> str | None:
    """The strong ETag of a response start that may be replayed, else None."""
    if message["status"] != 200:
        return None
    headers = [(bytes(k).lower(), bytes(v)) for k, v in message["headers"]]
    etags = [value for name, value in headers if name == b"etag"]
    control = (combined(headers, b"cache-control") or "").lower()
    vary = {part.strip().lower() for part in (combined(headers, b"vary") or "").split(",")}
    vary.discard("")
    strong = len(etags) == 1 and etags[0].startswith(b'"')
    if not strong or "immutable" not in control or not vary <= _KEYED:
        return None
    return etags[0].decode("latin-1")


class Replay:
    """ASGI middleware in front of the framework: a replayed answer names its route in the
    scope, for the telemetry around it."""

    def __init__(
        self,
        app: ASGIApp,
        cache: Callable[[], Cache | None],
        max_body_bytes: int = 8 << 20,
    ) -> None:
        self.app = app
        self.cache = cache
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        fields = combined_fields(scope["headers"], READ)
        key = replay_key(scope["path"], scope["query_string"], fields)
        cache = self.cache()
        if key is None or cache is None:
            await self.app(scope, receive, send)
            return
        kept = cache.recall(key)
        head = scope["method"] == "HEAD"
        if kept is None:
            if head:  # its answer has no body to keep
                await self.app(scope, receive, send)
            else:
                await self._keep(scope, receive, send, cache, key)
            return
        scope["route"] = kept.route
        status, headers, body = kept.reply(fields.get(b"if-none-match"), head)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def recall(
        self, path: str, query: bytes, fields: dict[bytes, str], largest: int
    ) -> Replayable | None:
        """What :meth:`__call__` would replay to a ``GET`` of ``path?query`` whose
        :data:`READ` headers are ``fields``, if it keeps it in no more than ``largest``
        bytes, else None: for the protocol, which answers it without ASGI
        (:mod:`service.middleware.direct`)."""
        key = replay_key(path, query, fields)
        cache = self.cache()
        if key is None or cache is None:
            return None
        kept: Replayable | None = cache.recall(key, largest)
        return kept

    async def _keep(
        self, scope: Scope, receive: Receive, send: Send, cache: Cache, key: tuple[object, ...]
    ) -> None:
        start: Message | None = None
        etag: str | None = None
        parts: list[bytes] = []
        size = 0

        async def keep(message: Message) -> None:
            nonlocal start, etag, size
            if message["type"] == "http.response.start":
                start, etag = message, _replayable(message)
            elif message["type"] == "http.response.body" and start is not None and etag:
                body = message.get("body", b"")
                size += len(body)
                if size > self.max_body_bytes:  # a larger answer is not kept: no copies
                    etag = None
                    parts.clear()
                else:
                    parts.append(bytes(body))
                    if not message.get("more_body", False):
                        self._remember(cache, key, scope, start, etag, b"".join(parts))
            await send(message)

        await self.app(scope, receive, keep)

    def _remember(
        self,
        cache: Cache,
        key: tuple[object, ...],
        scope: Scope,
        start: Message,
        etag: str,
        body: bytes,
    ) -> None:
        # names in lower case, as the protocol writes them (and a direct answer too)
        headers = [(bytes(k).lower(), bytes(v)) for k, v in start["headers"]]
        route = SimpleNamespace(path=getattr(scope.get("route"), "path", scope["path"]))
        size = len(body) + sum(len(k) + len(v) for k, v in headers)
        size += sum(len(part) for part in key if isinstance(part, str | bytes)) + _OVERHEAD_BYTES
        names = {name for name, _ in headers}
        framed = b"content-length" in names and not names & {b"transfer-encoding", b"connection"}
        cache.remember(key, Replayable(headers, body, etag, route, framed), size)

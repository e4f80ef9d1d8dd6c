"""One request answered by an ASGI app in this process, with no socket (``python -m service
export``): the app's answer passed on as a server passes it on, a piece at a time as the
app sends it, so that nothing but the app's own answer is held. httpx's ``ASGITransport``
keeps every piece and joins them (twice over, with ``Response.content``)."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from starlette.types import ASGIApp


async def request(
    app: ASGIApp,
    method: str,
    path: str,
    query: dict[str, str],
    body: bytes | None,
    write: Callable[[bytes], object],
    fields: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """``method path?query`` (with ``body``, JSON unless ``fields`` name its type, and the
    header ``fields``) asked of ``app``, whose lifespan has started: its status, its
    headers, and the body of an answer other than a 200, whose body goes to ``write``
    instead, a piece at a time as the app sends it. An ``OSError`` of ``write``'s is raised
    once the app has answered (its first; the app sends the rest into nothing meanwhile, as
    to a client that has gone, rather than see an error of the client's side)."""
    headers = [(b"host", b"export"), (b"accept-encoding", b"identity")]
    headers += [(name.lower().encode(), value.encode()) for name, value in (fields or {}).items()]
    if body is not None:
        if not any(name == b"content-type" for name, _ in headers):  # JSON unless fields say
            headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", b"%d" % len(body)))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": urllib.parse.urlencode(query).encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 0),
        "server": ("export", 80),
    }
    answered = asyncio.Event()
    pending: list[dict[str, Any]] = [{"type": "http.request", "body": body or b""}]
    status, refusal, failed = 0, bytearray(), list[OSError]()
    answered_headers: dict[str, str] = {}

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await answered.wait()  # the client stays until it has the whole answer
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            answered_headers.update(
                (bytes(name).decode("latin-1").lower(), bytes(value).decode("latin-1"))
                for name, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            if status != 200:
                refusal.extend(message.get("body", b""))
            elif not failed:
                try:
                    write(message.get("body", b""))
                except OSError as exc:
                    failed.append(exc)
            if not message.get("more_body", False):
                answered.set()

    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    if failed:
        raise failed[0]
    return status, answered_headers, bytes(refusal)

"""Operations: one ASGI middleware that times every request, counts it in the metrics
(``service.metrics``) and writes its access-log line.

It sits on the hot path of every request: a request only notes what its access-log line
says, and the lines are formatted and written in batches (at most 0.1 s late) instead of
one at a time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Final, TextIO

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.metrics import Telemetry
from service.text import printable

access_log = logging.getLogger("service.access")
# in the scope of a request whose answer was cut off (service.server.pacing): counted as 499,
# the status of a request whose client did not take its answer, as nginx counts it
CUT_OFF: Final = "service.cut_off"
CLIENT_GONE: Final = 499


def _route(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The route template: the one the framework (or replay) chose, else the route whose
    path the request names (a preflight, answered in front of the framework; the framework's
    own pages). Anything else is "unmatched" (a redirect of an unknown path too): labels
    come from a closed set, as a client could make up any number of paths."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    for route in routes:
        if route.matches(scope)[0] is not Match.NONE:
            return str(getattr(route, "path", "unmatched"))
    return "unmatched"


def format_access(record: dict[str, Any], as_json: bool) -> str:
    """One access-log line (without its newline): a JSON object, or
    ``time client "METHOD /path?query" status bytes ms`` with what the client sent escaped
    (see :func:`printable`)."""
    if as_json:
        return json.dumps(record, separators=(",", ":"))  # escapes every control character
    return _text_line(
        record["time"],
        record["client"],
        record["method"],
        record["path"],
        record["query"],
        record["status"],
        record["bytes"],
        record["duration_ms"],
    )


def _text_line(
    moment: str,
    client: str,
    method: str,
    path: str,
    query: str,
    status: int,
    size: int,
    milliseconds: float,
) -> str:
    target = f"{path}?{query}" if query else path
    line = f'{moment} {client} "{method} {target}" {status} {size}B {milliseconds}ms'
    if line.isprintable() and line.count('"') == 2 and "\\" not in line:
        return line  # nothing any field holds needs an escape: one pass over the line
    return (
        f'{moment} {printable(client)} "{printable(method)} {printable(target)}" {status} '
        f"{size}B {milliseconds}ms"
    )


# a request's fields for its line: when it ended (time.time()), client, method, path,
# query, route, status, body bytes, seconds taken
_Entry = tuple[float, Any, str, str, bytes, str, int, int, float]
BATCH: Final = 512  # requests whose lines are written together at most (about 64 KiB)


class AccessLog:
    """Access-log lines, written to ``stream`` in batches: the first request of a batch
    schedules a flush 0.1 s later, and a batch of :data:`BATCH` requests is flushed at once.

    A request only notes its fields; its line is formatted when its batch is written, in
    one loop with the others' (formatted on each request's path, the line cost a
    replayed answer about a fifth of its time)."""

    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self._pending: list[_Entry] = []
        self._second = -1
        self._stamp = ""
        self._zone = ""

    def _time(self, moment: float) -> str:
        second = int(moment)
        if second != self._second:  # strftime once a second, not once a request
            self._second = second
            pattern = "%Y-%m-%dT%H:%M:%S" if self.as_json else "%Y-%m-%d %H:%M:%S"
            local = time.localtime(second)
            self._stamp = time.strftime(pattern, local)
            self._zone = iso_zone(local) if self.as_json else ""
        return f"{self._stamp}.{int((moment - second) * 1000):03d}{self._zone}"

    def add(
        self, scope: Scope, method: str, route: str, status: int, size: int, seconds: float
    ) -> None:
        """Note one answered request; its line is written within 0.1 s."""
        if not self._pending:
            asyncio.get_running_loop().call_later(0.1, self.flush)
        self._pending.append(
            (
                time.time(),
                scope.get("client"),
                method,
                scope["path"],
                scope["query_string"],
                route,
                status,
                size,
                seconds,
            )
        )
        if len(self._pending) >= BATCH:
            self.flush()

    def _line(self, entry: _Entry) -> str:
        moment, client, method, path, raw_query, route, status, size, seconds = entry
        peer = f"{client[0]}:{client[1]}" if client else "-"
        query = raw_query.decode("latin-1")
        milliseconds = round(seconds * 1000, 3)
        if not self.as_json:
            return _text_line(
                self._time(moment), peer, method, path, query, status, size, milliseconds
            )
        record = {
            "time": self._time(moment),
            "level": "info",
            "logger": access_log.name,
            "client": peer,
            "method": method,
            "path": path,
            "query": query,
            "route": route,
            "status": status,
            "bytes": size,
            "duration_ms": milliseconds,
        }
        return format_access(record, as_json=True)

    def flush(self) -> None:
        if self._pending:
            lines = [self._line(entry) + "\n" for entry in self._pending]
            self._pending.clear()
            self.stream.write("".join(lines))
            self.stream.flush()


class TelemetryMiddleware:
    """Counts, times and logs every HTTP request (pure ASGI: the body streams through).
    The access log is on when the ``service.access`` logger is enabled for INFO."""

    def __init__(
        self,
        app: ASGIApp,
        telemetry: Telemetry,
        json_logs: bool,
        routes: Sequence[BaseRoute] = (),
        stream: TextIO | None = None,
    ) -> None:
        self.app = app
        self.routes = routes  # labels of requests no route took (preflights)
        self.requests = telemetry.requests
        self.log = AccessLog(stream or sys.stdout, json_logs)
        self.logging = access_log.isEnabledFor(logging.INFO)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                try:
                    await self.app(scope, receive, send)
                finally:
                    self.log.flush()
                return
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answer = [500, 0]  # status, body bytes

        # no coroutine of its own on the path of every message: the one of ``send``
        def observe(message: Message) -> Awaitable[None]:
            kind = message["type"]
            if kind == "http.response.start":
                answer[0] = message["status"]
            elif kind == "http.response.body":
                answer[1] += len(message.get("body", b""))
            return send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            status = CLIENT_GONE if scope.get(CUT_OFF) else answer[0]
            self.record(scope, status, answer[1], time.perf_counter() - start)

    def record(self, scope: Scope, status: int, size: int, seconds: float) -> None:
        """Count, time and log one answered request."""
        method, route = scope["method"], _route(scope, self.routes)
        self.requests.observe(method, route, status, seconds)
        if self.logging:
            self.log.add(scope, method, route, status, size, seconds)


def iso_zone(moment: time.struct_time) -> str:
    """The local time zone's offset at ``moment`` as ISO 8601 has it: ``+00:00``."""
    offset = time.strftime("%z", moment)
    return f"{offset[:3]}:{offset[3:]}"


def stderr_handler() -> logging.Handler:
    """The handler of every log line on standard error. Python's warnings (numpy's
    RuntimeWarnings, say) become records of the ``py.warnings`` logger, formatted like any
    other line, rather than free text that a JSON log shipper cannot read: they are
    captured here because uvicorn applies the logging configuration in each worker process,
    and this is the code of it that runs there."""
    logging.captureWarnings(True)
    return logging.StreamHandler(sys.stderr)


class JsonFormatter(logging.Formatter):
    """One JSON object a line, for every other log record (PE_LOG_FORMAT=json)."""

    def format(self, record: logging.LogRecord) -> str:
        local = self.converter(record.created)
        entry: dict[str, Any] = {
            "time": f"{time.strftime('%Y-%m-%dT%H:%M:%S', local)}.{int(record.msecs):03d}"
            + iso_zone(local),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))

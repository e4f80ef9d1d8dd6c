"""``HEAD`` on every ``GET`` route: the framework answers it as the ``GET`` it asks about,
and this layer sends that answer's status and headers (``Content-Length``, ``ETag``,
``X-Shape`` ...) without its body, as RFC 9110 (9.3.2) has it. A route that takes no ``GET``
answers ``405`` with its ``Allow``, as it does for any other method it does not take.

The routes are not declared for ``HEAD`` (FastAPI would describe each twice in the OpenAPI
document, under one operation id): the request is turned into a ``GET`` here, at the ASGI
level, just in front of the framework, and nowhere else, so that the telemetry counts and
logs it as a ``HEAD``, and the HTTP protocol, which reads the method from the scope it
made, sends no body and keeps the connection open for the next request.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """ASGI middleware: a ``HEAD`` request is passed on as a ``GET``, and the body of its
    answer dropped."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        # a copy: the server's own scope stays a HEAD's
        inner = {**scope, "method": "GET"}

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        try:
            await self.app(inner, receive, bodiless)
        finally:
            # what the framework learnt of the request (its route, for the telemetry)
            scope.update({key: value for key, value in inner.items() if key not in scope})

"""A replayed answer made by the protocol without ASGI (``service.middleware.direct``) is
the stack's, byte for byte, counted and logged as the stack's: the same requests go, on one
connection each, to the app and to a twin whose protocol takes every request through the
stack, driven in process as ``test_protocol.py`` drives the protocol, with the app's lifespan
running."""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import replace
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.lifespan.on import LifespanOn
from uvicorn.server import ServerState

from service.app import create_app
from service.server.protocol import DIRECT_IN_A_READ, BoundedHttpToolsProtocol
from service.settings import Settings
from tests.server.test_protocol import Transport
from tests.support import sample

SLICE = "/v1/encodings/sinusoidal?max_len=64&d_model=16&stop=8&format=npy"
JSON = "/v1/encodings/rotary?max_len=32&head_dim=8&format=json"
DATE = re.compile(rb"\r\ndate: [^\r]*")


def request(target: str, *fields: str, method: str = "GET", version: str = "1.1") -> bytes:
    head = [f"{method} {target} HTTP/{version}", "Host: 127.0.0.1:8000", *fields]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


class Connection:
    """One connection of the service's protocol to ``app``: each exchange says what was
    written back and whether the stack (a new cycle of uvicorn's) answered it."""

    def __init__(
        self, config: Config, state: dict[str, Any], transport: Transport | None = None
    ) -> None:
        self.protocol = BoundedHttpToolsProtocol(
            config=config, server_state=ServerState(), app_state=state
        )
        self.transport = transport or Transport()
        self.protocol.connection_made(self.transport)
        self.answered = 0
        complete = self.protocol.on_response_complete

        def on_response_complete() -> None:
            complete()
            self.answered += 1

        self.protocol.on_response_complete = on_response_complete  # type: ignore[method-assign]

    def written_directly(self) -> list[tuple[Any, ...]]:
        """From now on, the answers the protocol writes without ASGI, as it writes them."""
        written: list[tuple[Any, ...]] = []
        write = self.protocol._write_directly

        def counted(*args: Any) -> None:
            written.append(args)
            write(*args)

        self.protocol._write_directly = counted  # type: ignore[method-assign,assignment]
        return written

    async def exchange(self, data: bytes, answers: int = 1) -> tuple[bytes, bool]:
        """What is written for ``data`` (``answers`` requests), without its date; and
        whether every answer was made without ASGI."""
        cycle, start, expected = self.protocol.cycle, len(self.transport.written), self.answered
        self.protocol.data_received(data)
        for _ in range(100_000):  # turns of the loop, not a time: the answers are made in few
            if self.answered >= expected + answers:
                break
            await asyncio.sleep(0)
        assert self.answered >= expected + answers, "no answer"
        direct = self.protocol.cycle is cycle
        return DATE.sub(b"", bytes(self.transport.written[start:])), direct


async def _connected(settings: Settings, **config: Any) -> tuple[Config, LifespanOn]:
    app = create_app(settings)
    uvicorn_config = Config(app=app, http=BoundedHttpToolsProtocol, log_config=None, **config)
    uvicorn_config.load()
    lifespan = LifespanOn(uvicorn_config)
    await lifespan.startup()
    return uvicorn_config, lifespan


async def served(settings: Settings, exchanges: list[bytes], direct: bool) -> dict[str, Any]:
    app = create_app(settings)
    if not direct:
        app.edge = replace(app.edge, direct=None)  # type: ignore[attr-defined]
    telemetry = app.edge.direct.telemetry if direct else None  # type: ignore[attr-defined]
    config = Config(app=app, http=BoundedHttpToolsProtocol, log_config=None)
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    log = io.StringIO()
    stack = app.outer_middleware_stack  # type: ignore[attr-defined]
    for layer in (stack, telemetry):
        if layer is not None:
            layer.log.stream, layer.logging = log, True
    try:
        connection = Connection(config, lifespan.state)
        answers = [await connection.exchange(each) for each in exchanges]
        # on a connection of its own: the last request may have closed the first
        metrics, _ = await Connection(config, lifespan.state).exchange(request("/metrics"))
    finally:
        await lifespan.shutdown()
    return {"answers": answers, "metrics": metrics, "log": log.getvalue()}


def both(settings: Settings, exchanges: list[bytes]) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        asyncio.run(served(settings, exchanges, direct=True)),
        asyncio.run(served(settings, exchanges, direct=False)),
    )


def counted(metrics: bytes) -> list[str]:
    """The request counts by route and status (the latency histogram's sums vary)."""
    lines = metrics.decode().splitlines()
    return [line for line in lines if line.startswith("pe_http_requests_total{")]


def logged(log: str) -> list[str]:
    """Each access-log line without its time and duration, but the last (``/metrics``,
    whose size varies)."""
    return [line.split(" ", 2)[2].rsplit(" ", 1)[0] for line in log.splitlines()][:-1]


@pytest.mark.parametrize(
    ("origins", "fields"),
    sample(
        [
            pytest.param("*", (), id="npy"),
            pytest.param("*", ("Accept: application/json", "Accept: text/plain;q=0.5"), id="twice"),
            pytest.param("*", ("Accept: application/json", "Accept-Encoding: gzip"), id="gzip"),
            pytest.param("https://a.example", ("Origin: https://b.example",), id="other-origin"),
            pytest.param("https://a.example", ("Origin: https://a.example",), id="allowed-origin"),
            pytest.param("https://a.example", (), id="listed-origins"),
            pytest.param("", (), id="no-cors"),
        ],
        2,
    ),
)
def test_a_replayed_answer_made_directly_is_the_stacks(
    origins: str, fields: tuple[str, ...]
) -> None:
    settings = Settings(cors_origins=origins)
    target = JSON if any("json" in field for field in fields) else SLICE
    first = request(target, *fields)
    exchanges = [
        first,
        first,
        request(target, *fields, method="HEAD"),
        request(target, *fields, 'If-None-Match: "nope", *'),
        request(target, *fields, 'If-None-Match: "nope"'),
    ]
    direct, stack = both(settings, exchanges)
    assert [answer for answer, _ in direct["answers"]] == [a for a, _ in stack["answers"]]
    # the first kept the answer; each later one was answered without ASGI by the one, and
    # through the stack by its twin
    assert [made for _, made in direct["answers"]] == [False, True, True, True, True]
    assert not any(made for _, made in stack["answers"][1:])
    answers = [answer for answer, _ in direct["answers"]]
    assert answers[1].startswith(b"HTTP/1.1 200 OK\r\n")
    assert answers[1] == answers[0]
    assert answers[2] == answers[1].partition(b"\r\n\r\n")[0] + b"\r\n\r\n"  # HEAD
    assert answers[3].startswith(b"HTTP/1.1 304 ")
    assert counted(direct["metrics"]) == counted(stack["metrics"])
    assert logged(direct["log"]) == logged(stack["log"])
    assert len(logged(direct["log"])) == len(exchanges)


@pytest.mark.parametrize(
    "again",
    sample(
        [
            pytest.param(request(SLICE, "Connection: close"), id="connection-close"),
            pytest.param(request(SLICE, version="1.0"), id="http-1.0"),
            pytest.param(request(SLICE, "Content-Length: 2") + b"ab", id="a-body"),
            pytest.param(request(SLICE, "X-Forwarded-For: 10.1.2.3"), id="forwarded"),
            pytest.param(request(SLICE, "Expect: 100-continue"), id="expect"),
            pytest.param(request(SLICE, "Accept: " + "a/b, " * 200), id="unkept-accept"),
        ],
        2,
    ),
)
def test_what_replay_does_not_answer_alone_takes_the_stack(again: bytes) -> None:
    exchanges = [request(SLICE), again]
    direct, stack = both(Settings(), exchanges)
    assert direct["answers"] == stack["answers"]
    assert not direct["answers"][1][1]  # a cycle of the stack's
    assert logged(direct["log"]) == logged(stack["log"])


def test_pipelined_requests_are_answered_in_order() -> None:
    async def main() -> list[tuple[bytes, bool]]:
        config, lifespan = await _connected(Settings())
        try:
            connection = Connection(config, lifespan.state)
            kept = await connection.exchange(request(SLICE))
            # two replayed answers around one the stack makes, sent in one piece
            three = request(SLICE) + request("/healthz") + request(SLICE)
            return [kept, await connection.exchange(three, answers=3)]
        finally:
            await lifespan.shutdown()

    (kept, _), (three, _) = asyncio.run(main())
    answers = three.split(b"HTTP/1.1 ")[1:]
    assert len(answers) == 3
    assert b"HTTP/1.1 " + answers[0] == kept
    assert answers[1].startswith(b"200 OK")
    assert b"application/json" in answers[1]
    assert b"HTTP/1.1 " + answers[2] == kept


class Unread(Transport):
    """A transport whose client reads nothing: what is written stays in its buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.aborted = False
        self.taken = 0  # bytes the client has read

    def get_write_buffer_size(self) -> int:
        return len(self.written) - self.taken

    def abort(self) -> None:
        self.aborted = self.closed = True


def test_a_direct_answer_its_client_does_not_read_is_cut_off_at_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(send_timeout=0.05)

    async def main() -> Unread:
        config, lifespan = await _connected(settings)
        try:
            transport = Unread()
            connection = Connection(config, lifespan.state, transport)
            await connection.exchange(request(SLICE))
            transport.taken = len(transport.written)  # the first answer is read
            answer, direct = await connection.exchange(request(SLICE))
            assert direct
            assert answer.startswith(b"HTTP/1.1 200 OK")
            for _ in range(2_000):  # the deadline is the grace and a few ms of reading
                if transport.aborted:
                    break
                await asyncio.sleep(0.05)
            return transport
        finally:
            await lifespan.shutdown()

    assert asyncio.run(main()).aborted
    assert "it read slower than PE_MIN_READ_RATE" in caplog.text


def test_a_read_of_many_pipelined_requests_is_answered_in_turns() -> None:
    """At most DIRECT_IN_A_READ requests of one read are answered without ASGI, however many
    it holds: the rest take the stack's turns (and its pause of the reading), in order."""
    many = DIRECT_IN_A_READ * 3

    async def main() -> tuple[bytes, bytes, int]:
        config, lifespan = await _connected(Settings())
        try:
            connection = Connection(config, lifespan.state)
            kept, _ = await connection.exchange(request(SLICE))
            direct = connection.written_directly()
            answers, _ = await connection.exchange(request(SLICE) * many, answers=many)
            return kept, answers, len(direct)
        finally:
            await lifespan.shutdown()

    kept, answers, direct = asyncio.run(main())
    assert answers == kept * many
    assert direct == DIRECT_IN_A_READ


def test_a_later_head_on_a_connection_answered_directly_has_its_own_deadline() -> None:
    """A connection older than PE_HEAD_TIMEOUT whose requests were all answered without a
    cycle: a later head that arrives in pieces is timed from its first byte, not from the
    connection's start."""

    async def main() -> Transport:
        config, lifespan = await _connected(Settings(head_timeout=5))
        try:
            await Connection(config, lifespan.state).exchange(request(SLICE))  # kept
            connection = Connection(config, lifespan.state)
            # connected a minute ago: its first timer has fired, with no head open
            connection.protocol._head_started -= 60
            connection.protocol._stop_head_timer()
            _, direct = await connection.exchange(request(SLICE))
            assert direct
            written = len(connection.transport.written)
            connection.protocol.data_received(request(SLICE)[:10])  # a head begins
            for _ in range(100):  # turns of the loop: a deadline already past would fire
                await asyncio.sleep(0)
            assert len(connection.transport.written) == written
            return connection.transport
        finally:
            await lifespan.shutdown()

    assert not asyncio.run(main()).closed


def test_an_answer_kept_without_its_own_framing_takes_the_stack() -> None:
    async def main() -> bool:
        config, lifespan = await _connected(Settings())
        try:
            connection = Connection(config, lifespan.state)
            await connection.exchange(request(SLICE))
            cache = config.loaded_app.app.state.runtime.cache
            path, _, query = SLICE.partition("?")
            key = ("replay", path, query.encode(), None, None)
            cache.remember(key, replace(cache.recall(key), framed=False), 1 << 20)
            _, direct = await connection.exchange(request(SLICE))
            return direct
        finally:
            await lifespan.shutdown()

    assert not asyncio.run(main())


def test_uvicorns_concurrency_limit_is_the_stacks_to_keep() -> None:
    async def main() -> list[bool]:
        config, lifespan = await _connected(Settings(), limit_concurrency=1000)
        try:
            connection = Connection(config, lifespan.state)
            return [(await connection.exchange(request(SLICE)))[1] for _ in range(2)]
        finally:
            await lifespan.shutdown()

    assert asyncio.run(main()) == [False, False]


def test_a_read_stops_being_answered_directly_past_one_writes_bytes() -> None:
    """Four pipelined 1 MiB answers in one read: two written directly (2 MiB, the most one
    write may hold), the rest through the stack, in order."""
    table = "/v1/encodings/sinusoidal?max_len=512&d_model=512&format=npy"

    async def main() -> tuple[bytes, bytes, int]:
        config, lifespan = await _connected(Settings())
        try:
            connection = Connection(config, lifespan.state)
            kept, _ = await connection.exchange(request(table))
            direct = connection.written_directly()
            answers, _ = await connection.exchange(request(table) * 4, answers=4)
            return kept, answers, len(direct)
        finally:
            await lifespan.shutdown()

    kept, answers, direct = asyncio.run(main())
    assert answers == kept * 4
    assert direct == 2

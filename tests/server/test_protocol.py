"""The bounded protocol driven in process, as uvicorn's own tests drive theirs: a real
``BoundedHttpToolsProtocol`` over a transport that keeps what is written, for the bounds
that need no server process (414, 431, 400, the head's 408), and the app's settings
reaching it (the head timeout, CORS on a refusal) without a second reading of the
environment."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from uvicorn.config import Config
from uvicorn.lifespan.on import LifespanOn
from uvicorn.server import ServerState

from service.app import create_app
from service.server.edge import edge_of
from service.server.protocol import MAX_HEAD_BYTES, MAX_TARGET_BYTES, BoundedHttpToolsProtocol
from service.settings import Settings


class Transport(asyncio.Transport):
    """Keeps what the protocol writes; closing is remembered."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def answer(
    settings: Settings, *chunks: bytes, wait: float = 0.0, running: bool = False
) -> tuple[int, dict[str, str], Any]:
    """What the protocol writes for ``chunks`` received: status, headers, body's JSON; with
    the app's lifespan ``running``, for an answer of the app's."""

    async def main() -> Transport:
        config = Config(app=create_app(settings), http=BoundedHttpToolsProtocol, log_config=None)
        config.load()
        lifespan = LifespanOn(config)
        if running:
            await lifespan.startup()
        state = lifespan.state if running else {}
        protocol = BoundedHttpToolsProtocol(
            config=config, server_state=ServerState(), app_state=state
        )
        transport = Transport()
        protocol.connection_made(transport)
        for chunk in chunks:
            protocol.data_received(chunk)
        await asyncio.sleep(wait)
        for _ in range(100_000):  # turns of the loop, not a time: until the app has answered
            if transport.written or not running:
                break
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        if running:
            await lifespan.shutdown()
        return transport

    written = bytes(asyncio.run(main()).written)
    head, _, body = written.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, orjson.loads(body)


@pytest.mark.parametrize(
    ("chunks", "status", "words"),
    [
        pytest.param(
            [b"GET /" + b"a" * MAX_TARGET_BYTES + b" HTTP/1.1\r\n\r\n"], 414, "8", id="target"
        ),
        pytest.param(
            [b"GET / HTTP/1.1\r\n" + b"x-a: b\r\n" * (MAX_HEAD_BYTES // 8 + 64) + b"\r\n"],
            431,
            "head",
            id="head-in-one-read",
        ),
        pytest.param(
            [b"GET / HTTP/1.1\r\n"] + [b"x-a: " + b"b" * 1000 + b"\r\n"] * 40,
            431,
            "head",
            id="head-in-many-reads",
        ),
        pytest.param([b"NOT HTTP AT ALL\r\n\r\n"], 400, "not valid HTTP", id="malformed"),
    ],
)
def test_heads_past_their_bounds_are_refused(chunks: list[bytes], status: int, words: str) -> None:
    code, headers, document = answer(Settings(), *chunks)
    assert code == status
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert words in document["detail"]


def test_the_apps_head_timeout_reaches_the_protocol() -> None:
    """PE_HEAD_TIMEOUT of the app's settings (not of the environment): a head left
    unfinished past it is a 408 naming it."""
    code, _, document = answer(Settings(head_timeout=0.05), b"GET / HTTP/1.1\r\n", wait=0.2)
    assert code == 408
    assert "PE_HEAD_TIMEOUT" in document["detail"]
    assert "0.05 s" in document["detail"]


@pytest.mark.parametrize(
    ("origins", "expected"), [("*", "*"), ("https://example.org", None), ("", None)]
)
def test_a_refusal_carries_cors_as_the_apps_answers_do(origins: str, expected: str | None) -> None:
    _, headers, _ = answer(
        Settings(cors_origins=origins), b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n"
    )
    assert headers.get("access-control-allow-origin") == expected


def test_the_edge_is_found_through_the_layers_uvicorn_adds() -> None:
    app = create_app(Settings(send_timeout=3.5))

    class Wrapper:
        def __init__(self, inner: Any) -> None:
            self.app = inner

    assert edge_of(Wrapper(Wrapper(app))).settings.send_timeout == 3.5
    with pytest.raises(TypeError, match="create_app"):
        edge_of(Wrapper(object()))


def test_each_head_has_its_own_deadline_on_one_timer() -> None:
    """A keep-alive connection's heads each get PE_HEAD_TIMEOUT from their first byte: a
    second head begun after the first was read is not refused at the first's deadline (one
    timer a connection, re-armed), and is at its own."""

    async def main() -> tuple[bytes, bytes]:
        settings = Settings(head_timeout=0.3)
        config = Config(app=create_app(settings), http=BoundedHttpToolsProtocol, log_config=None)
        protocol = BoundedHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(b"OPTIONS /nothing HTTP/1.1\r\nhost: x\r\n\r\n")
        await asyncio.sleep(0.15)
        protocol.data_received(b"GET /nothing HTTP/1.1\r\n")  # the second head, unfinished
        await asyncio.sleep(0.2)  # past the first head's deadline, before the second's
        early = bytes(transport.written)
        await asyncio.sleep(0.3)
        late = bytes(transport.written)
        protocol.connection_lost(None)
        return early, late

    early, late = asyncio.run(main())
    assert b" 408 " not in early
    assert b"HTTP/1.1 408 " in late


def test_an_oversized_body_is_refused_before_it_is_read() -> None:
    """A ``Content-Length`` past ``PE_MAX_BODY_BYTES`` is answered 413 at once, with the
    connection closed after it, while the body is still coming."""
    head = (
        b"POST /v1/encodings/sinusoidal/apply HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-npy\r\nContent-Length: 5000000\r\n\r\n"
    )
    code, headers, document = answer(
        Settings(max_body_bytes=100_000), head, b"\0" * 65536, running=True
    )
    assert code == 413
    assert "PE_MAX_BODY_BYTES" in document["detail"]
    assert headers["connection"] == "close"

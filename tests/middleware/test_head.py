"""HEAD on every GET route: the GET's status and headers, no body (none on the wire either,
and the connection serves the next request); 304s; 405 with Allow where there is no GET."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess

import anyio
import anyio.from_thread
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from service.app import create_app
from service.middleware.head import HeadAsGet
from service.routes import ROUTERS
from service.settings import Settings
from tests.support import (
    APPLY,
    HEATMAP,
    PROBLEM,
    RAW,
    TABLE,
    WAIT,
    assert_problem,
    cache_stats,
    in_process,
    requests_counted,
)

# answers that change from one request to the next (counters): their length may differ
VOLATILE = {"/metrics", "/v1/cache"}
# a sample request of the routes whose answer needs a query (without, it is a 422, which
# HEAD must give too); any other GET route is asked with its path parameters filled in
SAMPLES = [
    (TABLE + "?max_len=5&d_model=6&format=raw", {}),
    (TABLE + "?max_len=64&d_model=64", {"accept-encoding": "gzip"}),
    (TABLE + "?max_len=5&d_model=6", {"accept": "application/x-npy"}),
    ("/v1/encodings/rotary?max_len=4&head_dim=8&format=npz", {}),
    ("/v1/biases/alibi?num_heads=4&max_len=4&format=raw", {}),
    ("/v1/biases/alibi/slopes?num_heads=8", {}),
    (HEATMAP + "?max_len=16&d_model=16", {}),
    ("/docs/assets/swagger-ui.css", {"accept-encoding": "gzip"}),
    ("/docs/assets/favicon.png", {}),
    ("/explorer/explorer.js", {}),
    (TABLE + "?max_len=0&d_model=6", {}),  # a problem
]
_FILL = {"name": "sinusoidal", "version": "1"}


def get_routes() -> list[str]:
    """The path of every GET route of the app, path parameters filled in."""
    paths = {"/openapi.json"} | {
        route.path  # type: ignore[attr-defined]
        for router in ROUTERS
        for route in router.routes
        if "GET" in getattr(route, "methods", ())
    }
    return sorted(re.sub(r"\{(\w+)\}", lambda m: _FILL.get(m[1], "x"), p) for p in paths)


def comparable(response: httpx.Response, url: str) -> dict[str, str]:
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    if url.split("?")[0] in VOLATILE:
        headers.pop("content-length", None)
    return headers


def assert_like_get(http: httpx.Client, url: str, headers: dict[str, str]) -> httpx.Response:
    """HEAD (before and after a GET, which may be kept for replay) answers as the GET."""
    first = http.head(url, headers=headers)
    got = http.get(url, headers=headers)
    again = http.head(url, headers=headers)
    assert first.status_code == got.status_code == again.status_code != 405, (url, got.text)
    assert first.content == again.content == b""
    assert comparable(first, url) == comparable(got, url) == comparable(again, url), url
    if "content-length" in got.headers and url.split("?")[0] not in VOLATILE:
        assert int(first.headers["content-length"]) == len(got.content) or got.headers.get(
            "content-encoding"
        )
    return got


@pytest.mark.parametrize("url", get_routes())
def test_every_get_route_answers_head(api: httpx.Client, url: str) -> None:
    assert_like_get(api, url, {})


@pytest.mark.parametrize(("url", "headers"), SAMPLES, ids=[u for u, _ in SAMPLES])
def test_head_gives_the_gets_headers(api: httpx.Client, url: str, headers: dict[str, str]) -> None:
    got = assert_like_get(api, url, headers)
    assert got.content  # there was a body to leave out


def test_a_table_head_has_its_shape_and_length(api: httpx.Client) -> None:
    response = api.head(TABLE + "?max_len=10&d_model=6&dtype=float64&format=raw")
    assert response.status_code == 200
    assert response.headers["content-type"] == RAW
    assert response.headers["x-shape"] == "10,6"
    assert response.headers["x-dtype"] == "float64"
    assert response.headers["content-length"] == str(10 * 6 * 8)
    assert response.headers["etag"].startswith('"')
    assert response.content == b""


@pytest.mark.parametrize("replayed", [False, True])
def test_head_honours_if_none_match(api: httpx.Client, replayed: bool) -> None:
    url = TABLE + f"?max_len=13&d_model=6&base={101 + replayed}&format=npy"
    etag = api.head(url).headers["etag"]
    if replayed:
        api.get(url)  # kept: the HEADs below are answered from memory
    before = cache_stats(api)["response_hits"]
    unchanged = api.head(url, headers={"if-none-match": etag})
    assert unchanged.status_code == 304
    assert unchanged.headers["etag"] == etag
    assert unchanged.content == b""
    assert api.head(url, headers={"if-none-match": '"other"'}).status_code == 200
    assert cache_stats(api)["response_hits"] == before + (2 if replayed else 0)


def test_head_on_a_post_route_is_405_with_allow(api: httpx.Client) -> None:
    response = api.head(APPLY)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.headers["content-type"] == PROBLEM
    assert response.content == b""
    assert_problem(api.get(APPLY), 405)  # as a GET


def test_head_of_an_unknown_path_is_404(api: httpx.Client) -> None:
    response = api.head("/nowhere")
    assert (response.status_code, response.content) == (404, b"")


def test_a_large_answer_has_no_body_either(api: httpx.Client) -> None:
    """Past 8 MiB: an answer with a permit, sent in pieces, and never replayed."""
    response = api.head(TABLE + "?max_len=4096&d_model=1024&format=raw")
    assert response.status_code == 200
    assert response.headers["content-length"] == str(4096 * 1024 * 4)
    assert response.content == b""


def _receive() -> Receive:
    """A request without a body, as a server has it: then nothing until the client goes."""
    taken = False

    async def receive() -> Message:
        nonlocal taken
        if taken:
            await anyio.sleep_forever()
        taken = True
        return {"type": "http.request", "body": b"", "more_body": False}

    return receive


def _drive(app: object, scope: Scope) -> list[Message]:
    """The messages ``app`` sends for ``scope`` (a request without a body)."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def call() -> None:
        await app(scope, _receive(), send)  # type: ignore[operator]

    anyio.run(call)
    return sent


def _scope(method: str, path: str, query: bytes = b"") -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"t")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


def test_the_head_layer_sends_the_gets_head_and_no_body() -> None:
    """Whatever the framework sends as the GET's body (here in three pieces), the HEAD's
    answer is its start and one empty body; the framework saw a GET, the server's scope
    stays a HEAD's and learns the route."""
    seen: list[str] = []

    async def framework(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["method"])
        scope["route"] = "the route"
        headers = [(b"content-length", b"6"), (b"etag", b'"t"')]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for part, more in ((b"ab", True), (b"cd", True), (b"ef", False)):
            await send({"type": "http.response.body", "body": part, "more_body": more})

    scope = _scope("HEAD", "/x")
    sent = _drive(HeadAsGet(framework), scope)
    assert seen == ["GET"]
    assert sent[0] == {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-length", b"6"), (b"etag", b'"t"')],
    }
    assert sent[1:] == [{"type": "http.response.body", "body": b"", "more_body": False}]
    assert (scope["method"], scope["route"]) == ("HEAD", "the route")
    got = _drive(HeadAsGet(framework), _scope("GET", "/x"))
    assert b"".join(m.get("body", b"") for m in got[1:]) == b"abcdef"


@pytest.mark.parametrize(
    ("path", "query", "status"),
    [
        (TABLE, b"max_len=300&d_model=64&format=npy", 200),
        (TABLE, b"max_len=4096&d_model=1024&format=raw", 200),  # a permit's, in pieces
        ("/docs/assets/swagger-ui-bundle.js", b"", 200),
        (APPLY, b"", 405),
    ],
)
def test_the_app_sends_no_body_bytes_for_a_head(path: str, query: bytes, status: int) -> None:
    """At the ASGI level (an HTTP client would hide a body: httpx drops it): no bytes."""
    app = create_app(Settings())
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        for method in ("HEAD", "GET", "HEAD"):  # the GET's answer may be kept and replayed
            sent: list[Message] = []

            async def send(message: Message, sent: list[Message] = sent) -> None:
                sent.append(message)

            portal.call(app, _scope(method, path, query), _receive(), send)
            assert sent[0]["status"] == status
            length = int(dict(sent[0]["headers"])[b"content-length"])
            bodies = [m.get("body", b"") for m in sent[1:]]
            if method == "HEAD":
                assert bodies == [b""]
            else:
                assert len(b"".join(bodies)) == length > 0


def test_a_head_is_counted_as_a_head() -> None:
    with in_process(create_app(Settings())) as http:
        url = TABLE + "?max_len=4&d_model=4"
        http.head(url)
        http.get(url)
        http.head(url)  # replayed
        text = http.get("/metrics").text
    counts = requests_counted(text)
    assert counts[("HEAD", TABLE, "200")] == 2
    assert counts[("GET", TABLE, "200")] == 1


def _exchange(sock: socket.socket, request: bytes) -> tuple[str, bytes]:
    """Send ``request``; its answer's head, and what followed it within 0.3 s (a HEAD's
    answer has nothing after its head)."""
    sock.sendall(request)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    head, rest = received.split(b"\r\n\r\n", 1)
    sock.settimeout(0.3)
    try:
        while chunk := sock.recv(65536):
            rest += chunk
    except TimeoutError:
        pass
    sock.settimeout(WAIT)
    return head.decode("latin-1"), rest


# the 16 MiB table on the wire is the full run's; test_a_large_answer_has_no_body_either
# checks it in process in the fast loop
# a real server's: the full run's (in process: tests/server/test_direct.py sends a HEAD and
# a GET on one connection of the protocol; test_a_large_answer_has_no_body_either, 16 MiB)
@pytest.mark.slow
@pytest.mark.parametrize("max_len", [8, 4096])
def test_a_head_sends_no_body_and_keeps_the_connection(live_url: str, max_len: int) -> None:
    """On the wire: the HEAD's head alone, then a GET on the same connection is answered
    whole (a small table, replayed; a 16 MiB one, sent in pieces)."""
    host, port = live_url.removeprefix("http://").split(":")
    target = f"{TABLE}?max_len={max_len}&d_model=1024&format=raw".encode()
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        for method in (b"HEAD", b"GET", b"HEAD", b"HEAD", b"GET"):
            head, rest = _exchange(sock, method + b" " + target + b" HTTP/1.1\r\nHost: t\r\n\r\n")
            assert head.startswith("HTTP/1.1 200"), head
            length = int(re.search(r"(?im)^content-length: (\d+)\r?$", head)[1])  # type: ignore[index]
            assert length == max_len * 1024 * 4
            assert "connection: close" not in head.lower()
            if method == b"HEAD":
                assert rest == b""
            else:
                while len(rest) < length:
                    chunk = sock.recv(1 << 20)
                    assert chunk
                    rest += chunk
                assert len(rest) == length


@pytest.mark.slow  # curl and a real server: the full run's
def test_curl_head(live_url: str) -> None:
    """``curl -I``: the status line and headers of the table, and nothing else."""
    curl = shutil.which("curl")
    assert curl, "curl is needed (bash .ci/run installs it)"
    url = f"{live_url}{TABLE}?max_len=3&d_model=8&format=raw"
    done = subprocess.run([curl, "-sS", "-I", url], capture_output=True, check=True, timeout=WAIT)
    text = done.stdout.decode()
    assert text.endswith("\r\n\r\n")  # the head, and no body after it
    status, *lines = text.strip().split("\r\n")
    assert status == "HTTP/1.1 200 OK"
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    assert headers["content-length"] == str(3 * 8 * 4)
    assert headers["content-type"] == RAW
    assert headers["x-shape"] == "3,8"
    assert headers["x-dtype"] == "float32"
    assert headers["etag"] == httpx.get(url, timeout=WAIT).headers["etag"]
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert done.stderr == b""

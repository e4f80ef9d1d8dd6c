"""CORS: pages of other origins may read every answer (``PE_CORS_ORIGINS``): tables, replayed
ones, 304s, problems, large answers; preflights are answered, or refused with a problem."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from service.app import create_app
from service.middleware.cors import EXPOSED_HEADERS, MAX_AGE
from service.settings import Settings
from tests.support import (
    APPLY,
    NPY,
    PROBLEM,
    TABLE,
    WAIT,
    assert_problem,
    cache_stats,
    in_process,
    npy_bytes,
    read_to_close,
    requests_counted,
)

ORIGIN = "http://elsewhere.example:8080"
NEEDED = {"etag", "x-shape", "x-dtype", "content-location", "inference-header-content-length"}


def hits(http: httpx.Client) -> int:
    return int(cache_stats(http)["response_hits"])


def exposed(response: httpx.Response) -> set[str]:
    value = response.headers.get("access-control-expose-headers", "")
    return {name.strip().lower() for name in value.split(",") if name.strip()}


def vary(response: httpx.Response) -> set[str]:
    return {v.strip().lower() for v in response.headers.get_list("vary") for v in v.split(",")}


def assert_readable(response: httpx.Response, origin: str = "*") -> None:
    """A page of another origin may read ``response`` and the headers a client needs."""
    assert response.headers.get_list("access-control-allow-origin") == [origin], response.headers
    assert exposed(response) >= NEEDED


@pytest.fixture
def listed() -> Iterator[httpx.Client]:
    """The app letting two origins read, in process."""
    settings = Settings(cors_origins=f"{ORIGIN}, https://Other.Example")
    with in_process(create_app(settings)) as http:
        yield http


def preflight(
    http: httpx.Client, url: str, method: str, headers: str | None = None, origin: str = ORIGIN
) -> httpx.Response:
    asked = {"origin": origin, "access-control-request-method": method}
    if headers is not None:
        asked["access-control-request-headers"] = headers
    return http.options(url, headers=asked)


def test_a_table_is_readable_from_any_origin(api: httpx.Client) -> None:
    url = f"{TABLE}?max_len=7&d_model=6&format=raw"
    answer = api.get(url, headers={"origin": ORIGIN})
    assert answer.status_code == 200
    assert_readable(answer)
    assert answer.headers["x-shape"] == "7,6"
    # the same headers without an Origin: one answer for every origin, for any cache to keep
    plain = api.get(url)
    assert_readable(plain)
    assert "origin" not in vary(answer) | vary(plain)


def test_replayed_answers_and_304s_are_readable(api: httpx.Client) -> None:
    """An answer kept for replay from a request without an Origin is served with CORS to one
    that has it; 304s, from the framework and from replay, carry it too."""
    url = f"{TABLE}?max_len=9&d_model=6&base=77&format=npy"
    first = api.get(url)  # kept for replay, without an Origin
    etag = first.headers["etag"]
    before = hits(api)
    replayed = api.get(url, headers={"origin": ORIGIN})
    assert hits(api) == before + 1
    assert replayed.content == first.content
    assert_readable(replayed)
    unchanged = api.get(url, headers={"origin": ORIGIN, "if-none-match": etag})
    assert hits(api) == before + 2
    assert unchanged.status_code == 304
    assert_readable(unchanged)
    fresh = f"{TABLE}?max_len=9&d_model=6&base=78&format=npy"
    answer = api.get(fresh, headers={"origin": ORIGIN, "if-none-match": '"nope"'})
    by_framework = api.get(fresh, headers={"origin": ORIGIN, "if-none-match": '"x", ' + "*"})
    assert (answer.status_code, by_framework.status_code) == (200, 304)
    assert_readable(by_framework)


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        pytest.param("GET", f"{TABLE}?max_len=0&d_model=4", 422, id="invalid"),
        pytest.param("GET", "/nowhere", 404, id="unknown-path"),
        pytest.param("PUT", TABLE, 405, id="method"),
        pytest.param("POST", APPLY + "?max_len=4", 415, id="media-type"),
    ],
)
def test_problems_are_readable(api: httpx.Client, method: str, url: str, status: int) -> None:
    """A page learns why it was refused: the problem document is readable too."""
    response = api.request(method, url, headers={"origin": ORIGIN, "content-type": "text/plain"})
    assert_problem(response, status)
    assert_readable(response)


def test_a_large_answer_sent_in_pieces_is_readable(api: httpx.Client) -> None:
    """Past 8 MiB an answer holds a permit while it is sent in pieces (PermitResponse)."""
    response = api.get(f"{TABLE}?max_len=4096&d_model=600&format=raw", headers={"origin": ORIGIN})
    assert response.status_code == 200
    assert len(response.content) == 4096 * 600 * 4 > 8 << 20
    assert_readable(response)


def test_a_post_is_readable(api: httpx.Client) -> None:
    body = b'{"embeddings": [[0.5, 0.5]]}'
    response = api.post(
        APPLY + "?scale=1",
        content=body,
        headers={"origin": ORIGIN, "content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert_readable(response)


@pytest.mark.parametrize(
    ("url", "method", "headers"),
    [
        pytest.param(TABLE + "?max_len=4&d_model=4", "GET", "if-none-match", id="revalidate"),
        pytest.param(APPLY + "?max_len=8", "POST", "content-type", id="apply-npy"),
        pytest.param(
            "/v2/models/sinusoidal/infer",
            "POST",
            "Inference-Header-Content-Length,Content-Type",
            id="v2",
        ),
        pytest.param(APPLY, "POST", "content-type, x-shape, x-dtype, accept", id="raw-body"),
        pytest.param(TABLE, "HEAD", None, id="head"),
    ],
)
def test_preflights_are_answered(
    api: httpx.Client, url: str, method: str, headers: str | None
) -> None:
    response = preflight(api, url, method, headers)
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert response.headers["access-control-allow-origin"] == "*"
    methods = {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
    assert methods == {"GET", "HEAD", "POST"}
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {h.strip().lower() for h in (headers or "").split(",") if h.strip()} <= allowed
    assert int(response.headers["access-control-max-age"]) == MAX_AGE


def test_an_apply_preflight_then_the_post(api: httpx.Client) -> None:
    """What a browser does for fetch(apply, {method: "POST", body: npy}): the preflight of
    its Content-Type, then the request itself."""
    url = APPLY + "?max_len=8&scale=1"
    ok = preflight(api, url, "POST", "content-type")
    assert ok.status_code == 204
    body = npy_bytes(np.zeros((1, 4), dtype=np.float32))
    answer = api.post(url, content=body, headers={"origin": ORIGIN, "content-type": NPY})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == NPY
    assert_readable(answer)


@pytest.mark.parametrize(
    ("method", "headers", "words"),
    [
        pytest.param("PUT", None, ["PUT is not allowed"], id="method"),
        pytest.param("DELETE", None, ["allowed: GET, HEAD, POST"], id="delete"),
        pytest.param("GET", "x-api-key", ["x-api-key", "not allowed"], id="header"),
        pytest.param("POST", "content-type, authorization", ["authorization"], id="credentials"),
    ],
)
def test_preflights_of_what_is_not_allowed_are_refused(
    api: httpx.Client, method: str, headers: str | None, words: list[str]
) -> None:
    response = preflight(api, TABLE, method, headers)
    assert_problem(response, 403, *words)
    assert "access-control-allow-origin" not in response.headers


def test_an_options_request_that_is_no_preflight_is_405(api: httpx.Client) -> None:
    response = api.options(TABLE, headers={"origin": ORIGIN})
    assert_problem(response, 405)
    assert "GET" in response.headers["allow"]
    assert_readable(response)


def test_listed_origins_are_named_and_others_are_not(listed: httpx.Client) -> None:
    url = f"{TABLE}?max_len=11&d_model=4&format=raw"
    unnamed = listed.get(url)  # kept for replay, without an Origin
    assert "access-control-allow-origin" not in unnamed.headers
    assert "origin" in vary(unnamed)  # a cache keeps it apart from a listed origin's
    before = hits(listed)
    named = listed.get(url, headers={"origin": ORIGIN})
    assert hits(listed) == before + 1
    assert_readable(named, ORIGIN)
    assert "origin" in vary(named)
    # listed in another case: browsers send scheme and host in lower case
    assert_readable(
        listed.get(url, headers={"origin": "https://other.example"}), "https://other.example"
    )
    stranger = listed.get(url, headers={"origin": "https://evil.example"})
    assert stranger.status_code == 200
    assert "access-control-allow-origin" not in stranger.headers
    assert not exposed(stranger)
    assert "origin" in vary(stranger)
    # a JSON answer varies on Accept-Encoding already: Origin joins it
    as_json = listed.get(f"{TABLE}?max_len=11&d_model=4", headers={"origin": ORIGIN})
    assert {"accept", "accept-encoding", "origin"} <= vary(as_json)
    assert len(as_json.headers.get_list("vary")) == 1


def test_listed_origins_preflights(listed: httpx.Client) -> None:
    ok = preflight(listed, APPLY, "POST", "content-type")
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == ORIGIN
    assert "origin" in vary(ok)
    refused = preflight(listed, APPLY, "POST", "content-type", origin="https://evil.example")
    assert_problem(refused, 403, "https://evil.example", "PE_CORS_ORIGINS")
    assert "access-control-allow-origin" not in refused.headers


def test_cors_can_be_switched_off() -> None:
    with in_process(create_app(Settings(cors_origins=""))) as http:
        answer = http.get(f"{TABLE}?max_len=4&d_model=4", headers={"origin": ORIGIN})
        assert answer.status_code == 200
        assert not [name for name in answer.headers if name.startswith("access-control-")]
        assert "origin" not in vary(answer)
        assert_problem(preflight(http, TABLE, "GET"), 405)


@pytest.mark.parametrize(
    ("value", "origins"),
    [
        ("*", None),
        (" * ", None),
        ("", frozenset()),
        (
            "https://a.example, http://localhost:3000",
            {"https://a.example", "http://localhost:3000"},
        ),
        ("HTTPS://A.Example:8443", {"https://a.example:8443"}),
    ],
)
def test_the_setting(value: str, origins: set[str] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PE_CORS_ORIGINS", value)
    assert Settings().allowed_origins() == origins


@pytest.mark.parametrize(
    "value",
    ["https://a.example/", "https://a.example/path", "*, https://a.example", "a.example", "null"],
)
def test_a_malformed_origin_setting_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="is not an origin"):
        Settings(cors_origins=value)


def test_preflights_are_counted_by_route() -> None:
    with in_process(create_app(Settings())) as http:
        preflight(http, APPLY + "?max_len=8", "POST", "content-type")
        preflight(http, "/v1/encodings/rotary", "PUT")
        preflight(http, "/made-up", "GET")
        text = http.get("/metrics").text
    counts = requests_counted(text)
    assert counts[("OPTIONS", APPLY, "204")] == 1
    assert counts[("OPTIONS", "/v1/encodings/rotary", "403")] == 1
    assert counts[("OPTIONS", "unmatched", "204")] == 1


def test_the_exposed_headers_are_those_clients_read() -> None:
    assert {name.lower() for name in EXPOSED_HEADERS} >= NEEDED


# a real server's: the full run's (in process: test_protocol's refusals carry CORS too)
@pytest.mark.slow
def test_a_request_refused_before_the_app_is_readable_too(live_url: str) -> None:
    """The HTTP protocol's own problems (a target too long: 414) carry CORS too."""
    host, port = live_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(
            b"GET /"
            + b"a" * (9 << 10)
            + b" HTTP/1.1\r\nHost: x\r\nOrigin: "
            + ORIGIN.encode()
            + b"\r\n\r\n"
        )
        received = read_to_close(sock)
    head = received.split(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 414")
    assert "access-control-allow-origin: *" in head
    assert f"content-type: {PROBLEM}" in head

"""Content negotiation: the format an Accept header asks for, gzip, and one combined view
of repeated header fields."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from service.app import create_app
from service.errors import NotAcceptable
from service.settings import Settings
from service.web.negotiation import accepts_gzip, combined, negotiate
from tests.support import in_process


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        pytest.param(None, "json", id="absent"),
        pytest.param("", "json", id="empty"),
        pytest.param("*/*", "json", id="anything"),
        pytest.param("application/*", "json", id="application-any"),
        pytest.param("application/json", "json", id="json"),
        pytest.param("application/x-npy", "npy", id="npy"),
        pytest.param("application/octet-stream", "raw", id="raw"),
        pytest.param("application/x-safetensors", "safetensors", id="safetensors"),
        pytest.param(
            "application/x-npy;q=0.5, application/x-safetensors;q=0.8", "safetensors", id="st-q"
        ),
        pytest.param("APPLICATION/X-NPY", "npy", id="case-insensitive"),
        pytest.param("text/html, application/x-npy;q=0.5", "npy", id="skip-unknown"),
        pytest.param("application/json;q=0.5, application/x-npy", "npy", id="q-wins"),
        pytest.param("application/x-npy, application/json", "npy", id="client-order-on-tie"),
        pytest.param("application/json;q=0, */*", "npy", id="q0-excludes"),
        pytest.param("application/json;q=0, application/x-npy;q=0, */*;q=0.1", "raw", id="rest"),
        pytest.param("*/*;q=0.1, application/octet-stream;q=0.9", "raw", id="specific-q"),
        pytest.param(
            "application/x-npy; charset=x; q=0.8, application/json;q=0.7", "npy", id="params"
        ),
        pytest.param("application/json;q=bogus, application/x-npy;q=0.1", "npy", id="bad-q-is-0"),
        pytest.param("garbage", "json", id="unparseable"),
        pytest.param("application/json;q=1e-400", "json", id="q-underflow-is-still-positive"),
        pytest.param("application/x-npy;q=0.000, */*;q=1e-400", "json", id="tiny-q-not-zero"),
        pytest.param("*", "json", id="bare-star"),
    ],
)
def test_negotiation(accept: str | None, expected: str) -> None:
    assert negotiate(accept) == expected


@pytest.mark.parametrize(
    "accept",
    [
        pytest.param("text/html", id="html"),
        pytest.param("image/*", id="image-any"),
        pytest.param("*/*;q=0", id="nothing"),
        pytest.param(
            "application/json;q=0, application/x-npy;q=0, application/octet-stream;q=0", id="all-q0"
        ),
        pytest.param("application/x-safetensors;q=0", id="safetensors-q0"),
    ],
)
def test_nothing_acceptable_is_406(accept: str) -> None:
    with pytest.raises(NotAcceptable) as caught:
        negotiate(accept)
    assert caught.value.status == 406
    assert "application/x-npy" in caught.value.extensions["available"]
    assert "application/x-safetensors" in caught.value.extensions["available"]


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        pytest.param(None, False, id="absent"),
        pytest.param("identity", False, id="identity"),
        pytest.param("gzip", True, id="gzip"),
        pytest.param("GZIP;q=0.5", True, id="q"),
        pytest.param("gzip;q=0", False, id="refused"),
        pytest.param("*", True, id="star"),
        pytest.param("*, gzip;q=0", False, id="star-but-not-gzip"),
        pytest.param("br, x-gzip", True, id="x-gzip"),
    ],
)
def test_accept_encoding(header: str | None, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


@pytest.mark.parametrize(
    ("headers", "value"),
    [
        pytest.param([], None, id="absent"),
        pytest.param([(b"accept", b"application/x-npy")], "application/x-npy", id="one"),
        pytest.param(
            [(b"accept", b"application/x-npy"), (b"x", b"y"), (b"accept", b"")],
            "application/x-npy, ",
            id="repeated-then-empty",
        ),
        pytest.param([(b"accept", b""), (b"accept", b"*/*")], ", */*", id="empty-first"),
    ],
)
def test_repeated_fields_are_combined_in_order(
    headers: list[tuple[bytes, bytes]], value: str | None
) -> None:
    assert combined(headers, b"accept") == value


def test_the_combined_value_negotiates_like_one_field() -> None:
    """``Accept: application/x-npy`` then an empty ``Accept:`` still asks for .npy."""
    both = [(b"accept", b"application/x-npy"), (b"accept", b"")]
    assert negotiate(combined(both, b"accept")) == "npy"
    assert (
        negotiate(combined([(b"accept", b""), (b"accept", b"application/x-npy")], b"accept"))
        == "npy"
    )


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/encodings/rotary?head_dim=8&max_len=4", None),
        (
            "POST",
            "/v1/compare",
            {
                "a": {"family": "rotary", "parameters": {"head_dim": 8}},
                "b": {"family": "rotary", "parameters": {"head_dim": 8}},
                "stop": 4,
            },
        ),
    ],
    ids=["table", "compare"],
)
def test_a_406_says_it_varies_by_accept(method: str, path: str, body: Any) -> None:
    """The refusal depends on Accept as the answer would: caches must key it by Accept."""
    with in_process(create_app(Settings())) as http:
        answer = http.request(
            method,
            path,
            content=None if body is None else orjson.dumps(body),
            headers={"accept": "text/html", "content-type": "application/json"},
        )
    assert answer.status_code == 406, answer.text
    assert "accept" in answer.headers.get("vary", "").lower()

"""Reading posted bodies: the format a Content-Type names, and bodies cut off at
``PE_MAX_BODY_BYTES`` while they are read (raw sockets against a real server)."""

from __future__ import annotations

import contextlib
import socket

import pytest

from service.errors import BodyTooLarge, Limit, UnsupportedMediaType
from service.web.bodies import body_format
from tests.support import APPLY


@pytest.mark.parametrize(
    ("content_type", "fmt"),
    [
        ("application/x-npy", "npy"),
        ("Application/JSON; charset=utf-8", "json"),
        ("application/x-npz", "npz"),
    ],
)
def test_body_formats(content_type: str, fmt: str) -> None:
    assert body_format(content_type) == fmt


@pytest.mark.parametrize("content_type", [None, "", "text/csv", "application/x-npy, text/csv"])
def test_other_media_types_are_415(content_type: str | None) -> None:
    with pytest.raises(UnsupportedMediaType):
        body_format(content_type)


def test_a_limit_names_its_setting() -> None:
    with pytest.raises(BodyTooLarge) as caught:
        Limit(10, "PE_MAX_BODY_BYTES").check_body("the request body", 11)
    assert caught.value.status == 413
    assert caught.value.extensions == {"limit": 10, "requested": 11, "setting": "PE_MAX_BODY_BYTES"}


def _exchange(url: str, head: bytes, chunks: list[bytes]) -> tuple[bytes, int]:
    """Send ``head`` then ``chunks`` on a raw socket until the server answers; returns the
    answer and how many bytes of body were sent before it came."""
    host, port = url.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        sock.settimeout(0.05)
        answer = b""
        for chunk in [*chunks, b""]:
            with contextlib.suppress(TimeoutError):
                answer = sock.recv(65536)
            if answer:
                break
            if chunk:
                sock.sendall(chunk)
                sent += len(chunk)
        sock.settimeout(10)
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_end = answer.index(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in answer[:head_end].lower().split(b"\r\n")
                if line.startswith(b"content-length")
            )
        )
        while len(answer) < head_end + 4 + length:
            answer += sock.recv(65536)
    return answer, sent


NPY_HEADER = "Content-Type: application/x-npy\r\n"


def test_an_oversized_content_length_is_refused_before_the_body(small_live_url: str) -> None:
    head = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\n{NPY_HEADER}Content-Length: 5000000\r\n\r\n"
    answer, sent = _exchange(small_live_url, head.encode(), [b"\0" * 65536] * 76)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"PE_MAX_BODY_BYTES" in answer
    assert sent < 5_000_000  # answered before the body was sent


def test_a_chunked_body_is_cut_off_at_the_limit(small_live_url: str) -> None:
    head = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\n{NPY_HEADER}Transfer-Encoding: chunked\r\n\r\n"
    chunk = b"4000\r\n" + b"\0" * 0x4000 + b"\r\n"  # 16 KiB a chunk, 300 of them: 4.9 MB
    answer, sent = _exchange(small_live_url, head.encode(), [chunk] * 300)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"PE_MAX_BODY_BYTES" in answer
    assert sent < 1_000_000  # the server stopped reading near its 100 kB limit

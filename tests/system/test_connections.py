"""Connections and bodies of hostile clients against a real server: memory follows the
bytes that arrive, stalled heads and bodies are cut off with 408, malformed requests get
a 400 problem, and what clients send cannot forge the logs or the counts."""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import APPLY, PROBLEM, WAIT, npy_bytes, read_to_close, rss_mib, serving

pytestmark = pytest.mark.slow

QUICK = {"PE_HEAD_TIMEOUT": "1", "PE_BODY_TIMEOUT": "1"}
NPY_POST = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server with one-second head and body timeouts, and the file its output goes to."""
    log = tmp_path_factory.mktemp("quick") / "server.log"
    with serving(QUICK, log_path=log) as (url, _):
        yield url, log


def connect(url: str, timeout: float = 6) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_one(sock: socket.socket) -> bytes:
    """One answer with a Content-Length, leaving the connection open."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def problem_in(answer: bytes, status: int) -> dict[str, Any]:
    """The problem document in a raw answer with ``status``."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    assert b"content-type: " + PROBLEM.encode() in head.lower()
    document: dict[str, Any] = orjson.loads(body)
    assert document["status"] == status
    assert {"type", "title", "status", "detail"} <= document.keys()
    return document


def metric(url: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=WAIT).text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def test_declared_lengths_reserve_no_memory_before_the_bytes_arrive() -> None:
    """Eight heads declare 64 MiB bodies (the limit) and send none of them: the server's
    memory must not grow by what they declared (it grew by 8 x 64 MiB)."""
    declared, count = 64 << 20, 8
    with serving() as (url, process):
        before = rss_mib(process.pid)
        sockets = [connect(url) for _ in range(count)]
        try:
            for sock in sockets:
                sock.sendall(f"{NPY_POST}Content-Length: {declared}\r\n\r\n".encode())
                sock.sendall(b"\x93NUMPY")  # the body has begun
            assert httpx.get(url + "/healthz", timeout=5).status_code == 200
            peak = before
            for _ in range(10):
                time.sleep(0.1)
                peak = max(peak, rss_mib(process.pid))
        finally:
            for sock in sockets:
                sock.close()
    assert peak - before < declared / (1 << 20)  # less than one declared body in all


def test_a_silent_connection_gets_408_after_the_head_timeout(quick: tuple[str, Path]) -> None:
    with connect(quick[0]) as sock:
        started = time.monotonic()
        answer = read_to_close(sock)
        waited = time.monotonic() - started
    document = problem_in(answer, 408)
    assert "PE_HEAD_TIMEOUT" in document["detail"]
    assert 0.8 < waited < 4


def trickle_until_closed(sock: socket.socket, data: bytes, every: float) -> bytes:
    """Send ``data`` a byte every ``every`` seconds until the server answers; its answer."""
    sock.settimeout(every)
    for byte in data:
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            sock.sendall(bytes([byte]))
            continue
        sock.settimeout(6)
        return answer + read_to_close(sock)
    raise AssertionError("the server let the whole trickle through")


def test_a_trickled_head_gets_408_after_the_head_timeout(quick: tuple[str, Path]) -> None:
    with connect(quick[0]) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        answer = trickle_until_closed(sock, b"X-Slow: " + b"s" * 12, 0.2)  # 4 s
        waited = time.monotonic() - started
    problem_in(answer, 408)
    assert waited < 4


def test_a_kept_alive_connection_times_its_next_head_from_its_first_byte(
    quick: tuple[str, Path],
) -> None:
    """Idle time between requests is the keep-alive timer's (5 s), not the head's (1 s):
    a head sent after 1.5 s idle is served; one that then stalls gets 408."""
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(quick[0]) as sock:
        sock.sendall(request)
        assert read_one(sock).startswith(b"HTTP/1.1 200")
        time.sleep(1.5)
        sock.sendall(request)
        assert read_one(sock).startswith(b"HTTP/1.1 200")
        time.sleep(1.5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()
        answer = read_to_close(sock)
        waited = time.monotonic() - started
    problem_in(answer, 408)
    assert 0.8 < waited < 4


def test_silent_connections_do_not_use_up_the_descriptors() -> None:
    """300 silent connections to a server limited to 256 descriptors: after the head
    timeout they are closed, and the server answers again."""
    command = ["sh", "-c", f"ulimit -n 256 && exec {sys.executable} -m service"]
    with serving({"PE_HEAD_TIMEOUT": "1"}, command=command) as (url, _):
        silent = [connect(url) for _ in range(300)]
        try:
            deadline, status = time.monotonic() + 10, 0
            while time.monotonic() < deadline and status != 200:
                try:
                    status = httpx.get(url + "/healthz", timeout=1).status_code
                except httpx.TransportError:
                    time.sleep(0.2)
            assert status == 200
        finally:
            for sock in silent:
                sock.close()


def test_a_stalled_body_gets_408_and_the_connection_is_closed(quick: tuple[str, Path]) -> None:
    with connect(quick[0]) as sock:
        sock.sendall(f"{NPY_POST}Content-Length: 1000\r\n\r\n".encode() + b"\x93NUMPY")
        started = time.monotonic()
        answer = read_to_close(sock)  # and the server closes the connection
        waited = time.monotonic() - started
    document = problem_in(answer, 408)
    assert "PE_BODY_TIMEOUT" in document["detail"]
    assert 0.8 < waited < 4


def test_a_slow_but_steady_body_is_served(quick: tuple[str, Path]) -> None:
    """The body timeout is for silence: a body that keeps coming is served, however slowly
    it comes within PE_SEND_TIMEOUT's grace (10 s; after it, at PE_MIN_READ_RATE)."""
    body = npy_bytes(np.zeros((2, 4), np.float32))
    with connect(quick[0]) as sock:
        sock.sendall(f"{NPY_POST}Content-Length: {len(body)}\r\n\r\n".encode())
        for start in range(0, len(body), len(body) // 5 + 1):
            time.sleep(0.5)  # 3 s in all, a byte at least every 0.5 s
            sock.sendall(body[start : start + len(body) // 5 + 1])
        assert read_one(sock).startswith(b"HTTP/1.1 200")


def test_a_body_answered_before_it_is_read_does_not_hold_the_connection(
    quick: tuple[str, Path],
) -> None:
    """After a 413 from Content-Length the rest of the body is not read at the client's
    pace: a client that keeps trickling it is closed on (it was kept for ever)."""
    with connect(quick[0]) as sock:
        sock.sendall(f"{NPY_POST}Content-Length: {1 << 40}\r\n\r\n".encode())
        started = time.monotonic()
        answer = b""
        sock.settimeout(0.2)
        with contextlib.suppress(ConnectionError):
            while time.monotonic() - started < 6:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    sock.sendall(b"\0")
                    continue
                if not chunk:
                    break
                answer += chunk
        waited = time.monotonic() - started
    assert problem_in(answer, 413)["setting"] == "PE_MAX_BODY_BYTES"
    assert waited < 4


def test_a_client_still_sending_gets_the_early_answer(quick: tuple[str, Path]) -> None:
    """A body refused unread (415) that the client sends in full: it reads the answer, not
    a reset, and its next request goes out on a new connection."""
    with httpx.Client(base_url=quick[0], timeout=WAIT) as http:
        refused = http.post(APPLY, content=b"x" * (16 << 20), headers={"content-type": "text/csv"})
        assert refused.status_code == 415
        assert http.get("/healthz").status_code == 200


def test_an_answer_before_the_body_has_arrived_says_connection_close(
    quick: tuple[str, Path],
) -> None:
    """A 415 sent before its one-byte body arrives tells the client the connection ends:
    a keep-alive client that sent the byte later and reused the connection found it
    closed under its next request ("Server disconnected without sending a response")."""
    head = f"POST {APPLY} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
    head += "Content-Length: 1\r\n\r\n"
    with connect(quick[0]) as sock:
        sock.sendall(head.encode())
        answer = read_one(sock)
        sock.sendall(b"x")
        assert answer.startswith(b"HTTP/1.1 415")
        assert b"\r\nconnection: close\r\n" in answer.lower()
        assert read_to_close(sock) == b""


@pytest.mark.parametrize(
    ("request_bytes", "words"),
    [
        pytest.param(
            b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "Duplicate Content-Length",
            id="duplicate-content-length",
        ),
        pytest.param(
            NPY_POST.encode() + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            "chunk size",
            id="bad-chunk-size",
        ),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: x\x01y\r\n\r\n",
            "header value",
            id="control-character-in-header",
        ),
        pytest.param(b"GET /he\x1bllo HTTP/1.1\r\n\r\n", "url", id="control-character-in-path"),
    ],
)
def test_malformed_requests_get_a_400_problem(
    quick: tuple[str, Path], request_bytes: bytes, words: str
) -> None:
    with connect(quick[0]) as sock:
        sock.sendall(request_bytes)
        answer = read_to_close(sock)
    document = problem_in(answer, 400)
    assert words in document["detail"]


def test_a_client_gone_mid_body_is_counted_499_without_a_traceback(
    quick: tuple[str, Path],
) -> None:
    url, log = quick
    labels = {"method": "POST", "route": APPLY}
    before = metric(url, "pe_http_requests_total", status="499", **labels)
    errors = metric(url, "pe_http_requests_total", status="500", **labels)
    with connect(url) as sock:
        sock.sendall(f"{NPY_POST}Content-Length: 1000\r\n\r\n".encode() + b"\x93NUMPY")
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while metric(url, "pe_http_requests_total", status="499", **labels) == before:
        assert time.monotonic() < deadline, "no 499 counted"
        time.sleep(0.1)
    assert metric(url, "pe_http_requests_total", status="500", **labels) == errors
    assert "Traceback" not in log.read_text(errors="replace")


def test_a_path_cannot_forge_access_log_lines(quick: tuple[str, Path]) -> None:
    url, log = quick
    with connect(url) as sock:
        sock.sendall(
            b"GET /x%0A1999-01-01%2000:00:00.000%20forged%1B[2J%22 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        assert read_one(sock).startswith(b"HTTP/1.1 404")
    deadline = time.monotonic() + 5
    while "forged" not in (text := log.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the request was not logged"
        time.sleep(0.1)
    assert "\x1b" not in text
    assert not any(line.startswith("1999-01-01") for line in text.splitlines())
    (line,) = [line for line in text.splitlines() if "forged" in line]
    assert '"GET /x\\x0a1999-01-01 00:00:00.000 forged\\x1b[2J\\x22" 404' in line

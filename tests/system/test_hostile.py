"""Slow and hostile clients against a real server: they are refused or cut off, and they
do not hold up anyone else."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.server.protocol import MAX_HEAD_BYTES, MAX_TARGET_BYTES
from tests.support import WAIT, read_to_close, rss_mib, running, serving

pytestmark = pytest.mark.slow

TABLE = "/v1/encodings/sinusoidal"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running() as base:
        yield base


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def trickle(sock: socket.socket, size: int) -> int:
    """Send ``size`` bytes a kilobyte at a time until the server stops taking them."""
    sent = 0
    try:
        while sent < size:
            sock.sendall(b"a" * 1024)
            sent += 1024
            time.sleep(0.001)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


def test_a_huge_request_target_is_refused_with_414(url: str) -> None:
    query = "max_len=4&d_model=4&" + "x" * (MAX_TARGET_BYTES + 10)
    response = httpx.get(f"{url}{TABLE}?{query}", timeout=WAIT)
    assert response.status_code == 414
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 414


def test_a_huge_header_is_refused_with_431(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = trickle(sock, MAX_HEAD_BYTES * 4)
        answer = read_to_close(sock)
    assert sent < MAX_HEAD_BYTES * 4  # the server closed the connection while we sent
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"application/problem+json" in answer


def test_a_huge_head_sent_at_once_is_refused_with_431(url: str) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-H%d: %s\r\n" % (i, b"v" * 1000) for i in range(48)
    )
    with connect(url) as sock:
        sock.sendall(head + b"\r\n")  # 48 KB, in one read of the server's
        answer = read_to_close(sock)
    assert answer.startswith(b"HTTP/1.1 431 ")


def test_a_large_but_allowed_head_is_served(url: str) -> None:
    headers = {f"x-h{i}": "v" * 100 for i in range(100)}  # 10 kB of headers
    assert httpx.get(url + "/healthz", headers=headers, timeout=WAIT).status_code == 200


def test_slow_clients_do_not_block_others(url: str) -> None:
    """Twenty connections trickle a request head a byte at a time; others are served."""
    slow = [connect(url) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        started = time.monotonic()
        for i in range(20):
            for sock in slow:
                sock.sendall(b"s" if i % 2 else b"t")
            response = httpx.get(f"{url}{TABLE}?max_len=8&d_model=8&format=npy", timeout=5)
            assert response.status_code == 200
        assert time.monotonic() - started < 20
        for sock in slow:  # and the slow ones are served when they finish
            sock.sendall(b": x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")  # the status line comes first
    finally:
        for sock in slow:
            sock.close()


def test_a_slow_body_does_not_block_others(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(
            f"POST {TABLE}/apply HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
            "Content-Length: 100000\r\n\r\n".encode()
        )
        for _ in range(10):
            sock.sendall(b"\0" * 100)
            assert httpx.get(url + "/healthz", timeout=5).status_code == 200


def test_an_idle_keep_alive_connection_is_closed(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        sock.settimeout(15)
        started = time.monotonic()
        assert sock.recv(65536) == b""  # closed by the server, not by us
        assert time.monotonic() - started < 10  # uvicorn's keep-alive timeout is 5 s


def test_clients_that_stop_reading_large_answers_are_cut_off() -> None:
    """Large answers hold one of a few permits until sent. Clients that ask for one and then
    never read are cut off after PE_SEND_TIMEOUT, so they cannot keep everyone else out."""
    with running({"PE_SEND_TIMEOUT": "1"}) as base:
        stalled = []
        for i in range(4):  # more than the permits (one per core on this machine)
            sock = connect(base)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            query = f"max_len=4096&d_model=1024&dtype=float64&base={3 + i}&format=npy"
            sock.sendall(f"GET {TABLE}?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            stalled.append(sock)
        try:
            time.sleep(0.5)
            query = "max_len=4096&d_model=1024&dtype=float64&base=99&format=npy"
            response = httpx.get(f"{base}{TABLE}?{query}", timeout=30)
            assert response.status_code == 200
            assert len(response.content) > 4096 * 1024 * 8
        finally:
            for sock in stalled:
                sock.close()


def ask(url: str, query: str, rcvbuf: int = 4096) -> socket.socket:
    """A connection that has asked for a table answer and reads nothing of it yet, with a
    small receive buffer (so that the kernel does not take the answer for it)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {TABLE}?{query}&format=npy HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def cut_off(url: str) -> int:
    """How many requests the server has counted as 499 so far."""
    metrics = httpx.get(url + "/metrics", timeout=WAIT).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics.splitlines()
        if line.startswith("pe_http_requests_total{") and 'status="499"' in line
    )


def wait_for_cut_offs(url: str, count: int, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while (seen := cut_off(url)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


def test_a_client_that_never_reads_a_small_answer_is_cut_off(tmp_path: Path) -> None:
    """Every answer, not only large ones, is taken at PE_MIN_READ_RATE after the grace of
    PE_SEND_TIMEOUT, or its client is cut off: one WARNING line, no traceback, a 499."""
    log = tmp_path / "server.log"
    env = {"PE_SEND_TIMEOUT": "0.5", "PE_MIN_READ_RATE": str(8 << 20)}
    with running(env, log_path=log) as base:
        # 7 MiB: below the size of a large answer, above what the kernel's buffers take
        with ask(base, "max_len=114688&d_model=8&dtype=float64") as sock:
            assert wait_for_cut_offs(base, 1, 20) == 1
            received = read_until_closed(sock)
        assert received < 114688 * 8 * 8
        assert httpx.get(base + "/healthz", timeout=WAIT).status_code == 200
    text = log.read_text()
    assert text.count("WARNING service.server.pacing: Cut off 127.0.0.1:") == 1
    assert "it read slower than PE_MIN_READ_RATE (8388608 bytes/s)" in text
    assert "Traceback" not in text
    assert f'{TABLE}?max_len=114688&d_model=8&dtype=float64&format=npy" 499' in text


def read_until_closed(sock: socket.socket) -> int:
    """Read what the server sent until it closed the connection: the byte count."""
    received = 0
    try:
        while chunk := sock.recv(1 << 16):
            received += len(chunk)
    except ConnectionResetError:
        pass
    return received


def test_slow_clients_share_a_bounded_budget() -> None:
    """Clients that leave their answers untaken share PE_SLOW_CLIENT_BYTES: past it, the
    next slow client is cut off at once, not after the grace."""
    env = {"PE_SEND_TIMEOUT": "60", "PE_SLOW_CLIENT_BYTES": str(20 << 20)}
    with running(env) as base:
        # eight 8 MiB answers, none read: two fit in 20 MiB (what the kernel's buffers take
        # is not held by the service, but each answer counts whole)
        stalled = [
            ask(base, f"max_len=131072&d_model=8&dtype=float64&base={2 + i}") for i in range(8)
        ]
        try:
            assert wait_for_cut_offs(base, 6, 20) == 6
            time.sleep(1)
            assert cut_off(base) == 6  # the two within the budget wait for their clients
        finally:
            for sock in stalled:
                sock.close()


def test_slow_readers_hold_no_permit() -> None:
    """Large answers take turns (one permit per core), but a client that reads slowly gives
    its permit back: two slow readers do not keep a third large request waiting."""
    env = {"PE_MIN_READ_RATE": "16384"}  # the slow readers stay above it
    with running(env) as base:
        stalled = [
            ask(base, f"max_len=262144&d_model=8&dtype=float64&base={2 + i}") for i in range(4)
        ]
        try:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:  # they read 64 KiB a second
                for sock in stalled:
                    sock.recv(8192)
                time.sleep(0.1)
            query = "max_len=262144&d_model=8&dtype=float64&base=99&format=npy"
            # with the permits held until sent, this would wait minutes for the slow readers
            response = httpx.get(f"{base}{TABLE}?{query}", timeout=10)
            assert response.status_code == 200
            assert len(response.content) > 262144 * 8 * 8
        finally:
            for sock in stalled:
                sock.close()


def test_work_whose_client_has_gone_is_not_done() -> None:
    """Six large tables asked for and dropped at once: those still waiting for their turn
    when their clients leave are never computed (each would take a core for a while), and
    all six count as 499."""
    with running() as base:
        dropped = [
            ask(base, f"max_len=1048576&d_model=8&dtype=float64&base={2 + i}") for i in range(6)
        ]
        for sock in dropped:
            sock.close()
        assert wait_for_cut_offs(base, 6, 60) == 6
        cache = httpx.get(base + "/v1/cache", timeout=WAIT).json()
        # one turn per core: at most that many had started when their clients left
        assert cache["tables_total"] <= (os.cpu_count() or 1)
        assert cache["bytes"] <= (os.cpu_count() or 1) * 1048576 * 8 * 8


def test_requests_the_protocol_refuses_are_counted() -> None:
    """Refusals before the app sees a request are in /metrics, by status."""
    with running() as base:
        with connect(base) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            assert read_to_close(sock).startswith(b"HTTP/1.1 400 ")
        query = "x" * (MAX_TARGET_BYTES + 10)
        assert httpx.get(f"{base}{TABLE}?{query}", timeout=WAIT).status_code == 414
        assert httpx.get(f"{base}{TABLE}?{query}", timeout=WAIT).status_code == 414
        metrics = httpx.get(base + "/metrics", timeout=WAIT).text
    assert 'pe_http_refused_total{status="400"} 1.0' in metrics
    assert 'pe_http_refused_total{status="414"} 2.0' in metrics


def test_posted_bodies_share_a_bounded_budget() -> None:
    """Eight clients posting large bodies at once share PE_POSTED_BYTES: the bodies whose
    bytes would take it past the budget are refused as they arrive, with a 503 to send them
    again, and the server holds no more than the budget (it held every byte sent before)."""
    body = 16 << 20
    env = {"PE_MAX_BODY_BYTES": str(body), "PE_POSTED_BYTES": str(2 * body)}
    head = (
        f"POST /v1/encodings/sinusoidal/apply HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/octet-stream\r\nX-Shape: {body // 4}\r\n"
        f"Content-Length: {body}\r\n\r\n"
    ).encode()
    with serving(env) as (base, process):
        idle = rss_mib(process.pid)
        clients = [connect(base) for _ in range(8)]
        try:
            for sock in clients:  # three quarters of each body, and then nothing more
                sock.sendall(head)
                with contextlib.suppress(OSError):
                    sock.sendall(b"\0" * (body * 3 // 4))
            time.sleep(1)
            held = rss_mib(process.pid) - idle
            answers = []
            for sock in clients:
                sock.settimeout(1)
                with contextlib.suppress(OSError):
                    answers.append(sock.recv(65536))
        finally:
            for sock in clients:
                sock.close()
    refused = [answer for answer in answers if answer.startswith(b"HTTP/1.1 503")]
    assert len(refused) >= 5, answers  # 96 MiB sent, 32 MiB taken
    assert all(b"retry-after: 1" in a.lower() and b"PE_POSTED_BYTES" in a for a in refused)
    assert held < 2 * body / (1 << 20) + 24, f"{held:.0f} MiB held for the bodies"

"""What a hostile client's attacks cost the server: memory held or reserved, CPU time taken
from others, and how long honest requests wait behind them, against real server processes.

    .venv/bin/python bench/hostile.py [--checkout DIR] [--only NAME ...]

Each case (and each part of a case that reports a peak) runs against a fresh
``python -m service``; ``--checkout`` starts the server from another checkout of this
repository (for a before/after comparison). Memory is read from ``/proc/<pid>/status``: the
idle ``VmRSS`` right after start and a small warm-up, then ``VmHWM`` (peak) and ``VmRSS``
(held) minus it. Clients that must misbehave use raw sockets; a client that reads slowly or
never sets ``SO_RCVBUF`` to 16 KiB before it connects, so that the kernel does not take the
answer off the server's hands. Every socket has a timeout and every case a deadline. Each
case prints one line: its name, its figures and the HTTP statuses seen (``-`` for a
connection that got no answer).

A watchdog kills the server if its RSS passes ``--rss-cap`` MiB (the line then says so).
``PE_SHUTDOWN_TIMEOUT=1`` and ``PE_LOG_LEVEL=warning`` are set for every server, so that
stopping one does not wait for the hostile clients' requests; nothing else is changed from the
defaults (in particular ``PE_BODY_TIMEOUT`` keeps its 30 s).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import io
import json
import os
import re
import select
import socket
import statistics
import struct
import subprocess
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import numpy as np

from tests.support import (
    APPLY,
    NPY,
    NPZ,
    SIMILARITY,
    TABLE,
    npy_bytes,
    protobuf_field,
    serving,
)

MiB: Final = 1 << 20
SMALL_RCVBUF: Final = 16 << 10
ENV: Final = {"PE_LOG_LEVEL": "warning", "PE_SHUTDOWN_TIMEOUT": "1"}
# a one-row apply: the honest request timed behind the attacks
ONE_ROW: Final = npy_bytes(np.ones((1, 8), np.float32))
JSON_TYPE: Final = {"Content-Type": "application/json"}


def proc_mib(pid: int, name: str) -> float:
    """``name`` (VmRSS, VmHWM) of process ``pid`` in MiB; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    found = re.search(rf"{name}:\s+(\d+) kB", status)
    return int(found[1]) / 1024 if found else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    url: str
    host: str
    port: int
    pid: int
    idle: float = 0.0
    killed: list[float] = field(default_factory=list)  # the RSS (MiB) it was killed at

    def peak(self) -> float:
        """Peak RSS growth over idle (VmHWM - idle), MiB."""
        return proc_mib(self.pid, "VmHWM") - self.idle

    def held(self) -> float:
        """RSS now over idle, MiB."""
        return proc_mib(self.pid, "VmRSS") - self.idle

    def note(self) -> str:
        return f" KILLED by the watchdog at {self.killed[0]:.0f} MiB RSS;" if self.killed else ""


@contextmanager
def server(
    checkout: Path | None, cap: float, warm: Iterable[str] = (), env: dict[str, str] | None = None
) -> Iterator[Server]:
    """A fresh server, warmed up (a small table, a one-row apply and ``warm``'s paths), with
    its idle RSS taken after that, and a watchdog that kills it past ``cap`` MiB."""
    with serving({**ENV, **(env or {})}, cwd=checkout) as (url, process):
        host, port = url.removeprefix("http://").split(":")
        srv = Server(url, host, int(port), process.pid)
        with httpx.Client(base_url=url, timeout=60) as client:
            client.get(f"{TABLE}?max_len=4&d_model=4")
            client.post(APPLY, content=ONE_ROW, headers={"content-type": NPY})
            for path in warm:
                client.get(path)
        time.sleep(0.3)
        srv.idle = proc_mib(process.pid, "VmRSS")
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.05):
                rss = proc_mib(process.pid, "VmRSS")
                if rss > cap:
                    srv.killed.append(rss)
                    process.kill()
                    return

        watchdog = threading.Thread(target=watch, daemon=True)
        watchdog.start()
        try:
            yield srv
        finally:
            stop.set()
            watchdog.join()


class Conn:
    """One raw HTTP/1.1 connection: requests written by hand, answers parsed by hand, read
    as fast as they come or at ``rate`` bytes per second, with a timeout on every call."""

    def __init__(self, srv: Server, rcvbuf: int | None = None, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so the window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((srv.host, srv.port))
        self.buffer = b""
        self.received = 0
        self.rate: float | None = None
        self.deadline = float("inf")
        self._started = 0.0

    def close(self) -> None:
        with suppress(OSError):
            self.sock.close()

    def send(
        self, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        lines = [f"{method} {target} HTTP/1.1", "Host: bench"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if body and "Content-Length" not in (headers or {}):
            lines.append(f"Content-Length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def _fill(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError("deadline")
        size = 65536
        if self.rate is not None:  # a fixed rate: 4 KiB at a time, on schedule
            size = 4096
            if not self._started:
                self._started = time.monotonic()
            due = self._started + self.received / self.rate
            time.sleep(max(0.0, due - time.monotonic()))
        chunk = self.sock.recv(size)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.received += len(chunk)
        self.buffer += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _skip(self, size: int) -> None:
        while size:
            if not self.buffer:
                self._fill()
            taken = min(size, len(self.buffer))
            self.buffer = self.buffer[taken:]
            size -= taken

    def head(self) -> tuple[int, dict[str, str]]:
        status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def answer(self, keep: bool = False) -> tuple[int, int, bytes]:
        """The next answer: status, body bytes, and the body itself if ``keep``."""
        status, headers = self.head()
        kept: list[bytes] = []
        start = self.received - len(self.buffer)
        if status in (204, 304):  # no body, whatever the headers say (RFC 9110, 6.4.1)
            pass
        elif "content-length" in headers:
            size = int(headers["content-length"])
            if keep:
                while len(self.buffer) < size:
                    self._fill()
                kept.append(self.buffer[:size])
            self._skip(size)
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while size := int(self._line().split(b";")[0], 16):
                if keep:
                    while len(self.buffer) < size:
                        self._fill()
                    kept.append(self.buffer[:size])
                self._skip(size)
                self._line()
            while self._line():  # trailers
                pass
        else:  # until the server closes
            with suppress(ConnectionError):
                while True:
                    self._fill()
                    if keep:
                        kept.append(self.buffer)
                    self.buffer = b""
        return status, self.received - len(self.buffer) - start, b"".join(kept)


def statuses(seen: Iterable[int | str]) -> str:
    counts = Counter(str(s) for s in seen)
    return " ".join(f"{k}×{n}" if n > 1 else k for k, n in sorted(counts.items()))


def request(
    srv: Server,
    target: str,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    limit: float = 80.0,
) -> tuple[str, float, int]:
    """One request on a fresh connection, read fully: status (or what went wrong), seconds,
    body bytes."""
    start = time.monotonic()
    conn: Conn | None = None
    try:
        conn = Conn(srv, timeout=limit)
        conn.deadline = start + limit
        conn.send(method, target, headers, body)
        status, size, _ = conn.answer()
        return str(status), time.monotonic() - start, size
    except TimeoutError:
        return f"no answer in {limit:.0f} s", time.monotonic() - start, 0
    except OSError as error:
        return type(error).__name__, time.monotonic() - start, 0
    finally:
        if conn:
            conn.close()


def one_row_apply(srv: Server, limit: float = 60.0) -> tuple[str, float, int]:
    return request(srv, APPLY, "POST", ONE_ROW, {"Content-Type": NPY}, limit)


def late_statuses(conns: list[Conn], wait: float = 2.0) -> list[str]:
    """The status each connection has been sent by now (read only now), ``-`` for none."""
    seen = []
    for conn in conns:
        conn.sock.settimeout(wait)
        conn.deadline = time.monotonic() + wait
        try:
            seen.append(str(conn.head()[0]))
        except TimeoutError:
            seen.append("-")
        except (OSError, ValueError, IndexError):
            seen.append("closed")
    return seen


def wide(seconds: float) -> str:
    return f"{seconds:.2f} s"


# --- the cases ---------------------------------------------------------------------------


def body_reservation(checkout: Path | None, cap: float) -> str:
    """16 connections declare a 64 MiB .npy body and send none of it."""
    with server(checkout, cap) as srv:
        conns = [Conn(srv, timeout=45) for _ in range(16)]
        start = time.monotonic()
        for conn in conns:
            conn.send("POST", APPLY, {"Content-Type": NPY, "Content-Length": str(64 * MiB)}, b"")
        time.sleep(3)
        peak, held = srv.peak(), srv.held()
        health = request(srv, "/healthz", limit=10)
        answered: dict[int, tuple[float, str]] = {}
        closed: dict[int, float] = {}
        socks = {conn.sock.fileno(): i for i, conn in enumerate(conns)}
        while len(closed) < len(conns) and time.monotonic() < start + 40:
            ready, _, _ = select.select(
                [c.sock for c in conns if c.sock.fileno() in socks], [], [], 0.5
            )
            for sock in ready:
                i = socks[sock.fileno()]
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                now = time.monotonic() - start
                if chunk and i not in answered:
                    answered[i] = (now, chunk.split(b" ", 2)[1].decode() if b" " in chunk else "?")
                if not chunk:
                    closed[i] = now
                    del socks[sock.fileno()]
        for conn in conns:
            conn.close()
        when = sorted(closed.values())
        close_text = (
            f"closed by the server {len(when)}/16 at {when[0]:.1f}-{when[-1]:.1f} s"
            if when
            else "none closed by the server in 40 s"
        )
        seen = [answered[i][1] if i in answered else "-" for i in range(len(conns))]
        return (
            f"peak {peak:+.0f} MiB, held {held:+.0f} MiB after 3 s (healthz {health[0]} in "
            f"{health[1] * 1e3:.0f} ms); {close_text};{srv.note()} statuses {statuses(seen)}"
        )


def json_strings(checkout: Path | None, cap: float) -> str:
    """A JSON apply body whose embeddings are strings: 1 MB (one 1e6-character string and
    two empty ones), 13 MB (13 such strings), and (not in the brief) 1 MB of one such string
    and 255 empty ones: a numpy string array gives every element the longest one's room."""
    text = '"' + "a" * 1_000_000 + '"'
    bodies = [
        ("1 MB", '{"embeddings": [' + text + ', "", ""]}'),
        ("13 MB", '{"embeddings": [' + ", ".join([text] * 13) + "]}"),
        ("1 MB, 256 strings", '{"embeddings": [' + text + ', ""' * 255 + "]}"),
    ]
    parts = []
    for name, body in bodies:
        with server(checkout, cap) as srv:
            status, seconds, _ = request(
                srv, APPLY, "POST", body.encode(), {"Content-Type": "application/json"}
            )
            parts.append(
                f"{name}: {status} in {wide(seconds)}, peak {srv.peak():+.0f} MiB{srv.note()}"
            )
    return "; ".join(parts)


def cached_mib(srv: Server) -> float:
    """The bytes /v1/cache says it holds, MiB (0 if it does not answer)."""
    try:
        return float(httpx.get(srv.url + "/v1/cache", timeout=30).json()["bytes"]) / MiB
    except (httpx.HTTPError, ValueError, KeyError):
        return 0.0


def cache_bytes(srv: Server) -> str:
    try:
        stats = httpx.get(srv.url + "/v1/cache", timeout=30).json()
    except (httpx.HTTPError, ValueError) as error:
        return f"/v1/cache failed ({type(error).__name__})"
    return (
        f"/v1/cache bytes {stats['bytes'] / MiB:.1f} MiB "
        f"(response_bytes {stats.get('response_bytes', 0) / MiB:.1f} MiB)"
    )


def frequency_cache(checkout: Path | None, cap: float) -> str:
    """20 one-row tables 16,777,216 columns wide, a new base each (two at a time, so that
    the old code's 5 s each fits the case's time)."""
    with server(checkout, cap) as srv:
        start = time.monotonic()

        def send(i: int) -> str:
            if srv.killed or time.monotonic() - start > 75:
                return "not sent"
            query = f"max_len=1&d_model=16777216&base={10000 + i}&format=npy"
            return request(srv, f"{TABLE}?{query}", limit=30)[0]

        with ThreadPoolExecutor(2) as pool:
            seen = list(pool.map(send, range(20)))
        took = time.monotonic() - start
        return (
            f"20 requests in {wide(took)}: held {srv.held():+.0f} MiB, peak "
            f"{srv.peak():+.0f} MiB, {cache_bytes(srv)};{srv.note()} statuses {statuses(seen)}"
        )


def accept_headers(checkout: Path | None, cap: float) -> str:
    """3,000 small tables, each with a distinct 30 KB Accept header."""
    with server(checkout, cap) as srv:

        def send(n: int) -> list[str]:
            seen = []
            with httpx.Client(base_url=srv.url, timeout=30) as client:
                for _ in range(n):
                    accept = f"application/json, text/x-{os.urandom(15000).hex()};q=0.1"
                    try:
                        r = client.get(f"{TABLE}?max_len=4&d_model=4", headers={"accept": accept})
                        seen.append(str(r.status_code))
                    except httpx.HTTPError as error:
                        seen.append(type(error).__name__)
            return seen

        start = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            seen = [s for part in pool.map(send, [750] * 4) for s in part]
        took = time.monotonic() - start
        return (
            f"3000 requests in {wide(took)}: held {srv.held():+.1f} MiB, peak "
            f"{srv.peak():+.1f} MiB, {cache_bytes(srv)};{srv.note()} statuses {statuses(seen)}"
        )


def similarity_wide(checkout: Path | None, cap: float) -> str:
    """similarity.png 67,108,864 columns wide: 64 positions (the brief's; over the element
    limit before any work, old and new) and 1 position (within the old element limit)."""
    warm = [f"{SIMILARITY}?max_len=8&d_model=8"]  # matplotlib imported before the idle RSS
    parts = []
    for rows in (64, 1):
        with server(checkout, cap, warm) as srv:
            query = f"max_len={rows}&d_model=67108864"
            status, seconds, size = request(srv, f"{SIMILARITY}?{query}", limit=85)
            parts.append(
                f"{query}: {status} in {wide(seconds)} ({size} bytes), peak "
                f"{srv.peak():+.0f} MiB, held {srv.held():+.0f} MiB{srv.note()}"
            )
    return "; ".join(parts)


def npz(n: int) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        embeddings=np.zeros((n, 1, 1), np.float32),
        position_ids=np.zeros((n, 1), np.int64),
    )
    return buffer.getvalue()


def cpu(checkout: Path | None, cap: float) -> str:
    parts = []
    # (a) 16M one-element sequences in a small compressed .npz; and the largest whose
    # decompressed members fit the default 64 MiB body limit (12 bytes a row)
    for n in (16_777_216, (64 * MiB - 1024) // 12):
        body = npz(n)
        with server(checkout, cap) as srv:
            status, seconds, _ = request(
                srv, f"{APPLY}?format=npy", "POST", body, {"Content-Type": NPZ}, limit=85
            )
        parts.append(
            f"(a) npz N={n:,} ({len(body) / 1e3:.0f} kB, {12 * n / MiB:.0f} MiB decompressed): "
            f"{status} in {wide(seconds)}{srv.note()}"
        )
    # (b) a 67,108,864 x 1 table
    with server(checkout, cap) as srv:
        status, seconds, size = request(srv, f"{TABLE}?max_len=67108864&d_model=1&format=npy")
        parts.append(f"(b) 67108864x1: {status} in {wide(seconds)} ({size / MiB:.0f} MiB)")
    big = "max_len=8388608&d_model=8&dtype=float64&format=npy"
    # (c) two large cold tables read in threads; a one-row apply 0.3 s later
    with server(checkout, cap) as srv, ThreadPoolExecutor(2) as pool:
        bigs = [pool.submit(request, srv, f"{TABLE}?{big}&base={b}", limit=85) for b in (3, 5)]
        time.sleep(0.3)
        status, seconds, _ = one_row_apply(srv)
        done = [f.result() for f in bigs]
        parts.append(
            f"(c) one-row apply behind 2 large tables: {status} in {wide(seconds)} (the tables: "
            + ", ".join(f"{s} in {wide(t)}" for s, t, _ in done)
            + f"){srv.note()}"
        )
    # (d) six large cold tables asked for and dropped at once; then a one-row apply
    with server(checkout, cap) as srv:
        before = cpu_seconds(srv.pid)
        for b in range(6):
            conn = Conn(srv, timeout=10)
            conn.send("GET", f"{TABLE}?{big}&base={7 + b}")
            conn.close()
        dropped = time.monotonic()
        time.sleep(0.3)
        status, seconds, _ = one_row_apply(srv)
        # how long the server keeps computing for clients that have gone (until 0.5 s idle)
        last, busy_until = cpu_seconds(srv.pid), time.monotonic()
        while time.monotonic() < dropped + 60:
            time.sleep(0.5)
            now = cpu_seconds(srv.pid)
            if now - last < 0.05:
                break
            last, busy_until = now, time.monotonic()
        parts.append(
            f"(d) one-row apply after 6 dropped large tables: {status} in {wide(seconds)}; "
            f"server busy {busy_until - dropped:.1f} s after the drop, "
            f"{cpu_seconds(srv.pid) - before:.1f} CPU s{srv.note()}"
        )
    return "; ".join(parts)


def slow_readers(checkout: Path | None, cap: float) -> str:
    parts = []
    table = "max_len=1048576&d_model=8&dtype=float64&format=npy"  # 64 MiB answers
    # (a) two clients read 64 MiB answers at 130 KB/s; a third reads another fast
    with server(checkout, cap) as srv:
        stop = threading.Event()
        outcome: list[str] = ["", ""]

        def slow(i: int) -> None:
            conn = Conn(srv, rcvbuf=SMALL_RCVBUF, timeout=30)
            conn.rate = 130e3
            try:
                conn.send("GET", f"{TABLE}?{table}&base={3 + i}")
                conn.deadline = time.monotonic() + 75
                status, headers = conn.head()
                outcome[i] = str(status)
                size = int(headers.get("content-length", 1 << 40)) + conn.received
                size -= len(conn.buffer)
                conn.buffer = b""
                while not stop.is_set() and conn.received < size:
                    conn._fill()
                    conn.buffer = b""
                if conn.received >= size:
                    outcome[i] += " (read fully)"
            except TimeoutError:
                outcome[i] += " (stalled)"
            except OSError as error:
                outcome[i] += f" ({type(error).__name__})"
            finally:
                outcome[i] += f" {conn.received / MiB:.1f} MiB read"
                conn.close()

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(1)
        status, seconds, size = request(srv, f"{TABLE}?{table}&base=11", limit=60)
        stop.set()
        for thread in threads:
            thread.join()
        parts.append(
            f"(a) fast reader behind 2 slow ones: {status} in {wide(seconds)} "
            f"({size / MiB:.0f} MiB); slow readers: {', '.join(outcome)}{srv.note()}"
        )

    # (b) 30 answers just under 8 MiB, never read; (c) 8 applies of 16 MiB, never read
    apply_body = npy_bytes(np.ones((32, 256, 512), np.float32))

    def never_read(label: str, count: int, start: Callable[[Conn, int], None]) -> str:
        with server(checkout, cap) as srv:
            conns = [Conn(srv, rcvbuf=SMALL_RCVBUF, timeout=30) for _ in range(count)]
            with ThreadPoolExecutor(count) as pool:
                list(pool.map(start, conns, range(count)))
            sent = time.monotonic()
            figures = []
            for at in (5, 40):
                time.sleep(max(0.0, sent + at - time.monotonic()))
                figures.append(f"after {at} s held {srv.held():+.0f} MiB (peak {srv.peak():+.0f})")
            health = request(srv, "/healthz", limit=10)
            counted = cache_bytes(srv)
            outside = srv.held() - cached_mib(srv)
            seen = late_statuses(conns)
            for conn in conns:
                conn.close()
            return (
                f"{label}: {', '.join(figures)}, {counted}, held outside the cache "
                f"{outside:+.0f} MiB; healthz {health[0]} in "
                f"{health[1] * 1e3:.0f} ms;{srv.note()} statuses {statuses(seen)}"
            )

    def eight_mib(conn: Conn, i: int) -> None:
        conn.send("GET", f"{TABLE}?max_len=130000&d_model=8&dtype=float64&base={3 + i}&format=npy")

    def sixteen_mib(conn: Conn, i: int) -> None:
        conn.send("POST", APPLY, {"Content-Type": NPY}, apply_body)

    parts.append(never_read("(b) 30 x 7.9 MiB tables never read", 30, eight_mib))
    parts.append(never_read("(c) 8 x 16 MiB applies never read", 8, sixteen_mib))
    return "; ".join(parts)


def labels(checkout: Path | None, cap: float) -> str:
    """5,000 distinct paths /explorer/<2,000 random hex digits>/ (a request line well under
    the 8 KiB limit), then /metrics."""
    with server(checkout, cap) as srv:

        def send(n: int) -> list[str]:
            with httpx.Client(base_url=srv.url, timeout=30) as client:
                return [
                    str(client.get(f"/explorer/{os.urandom(1000).hex()}/").status_code)
                    for _ in range(n)
                ]

        with ThreadPoolExecutor(4) as pool:
            seen = [s for part in pool.map(send, [1250] * 4) for s in part]
        status, seconds, size = request(srv, "/metrics", limit=60)
        return (
            f"/metrics {status}: {size / 1e6:.2f} MB in {wide(seconds)}; held "
            f"{srv.held():+.0f} MiB;{srv.note()} statuses of the 5,000 {statuses(seen)}"
        )


def cache_listing(checkout: Path | None, cap: float) -> str:
    """60,000 distinct small tables (pipelined on 4 keep-alive connections), then
    /v1/cache timed, and a /healthz sent right after it."""
    total, batch = 60_000, 100
    with server(checkout, cap) as srv:
        soft = time.monotonic() + 70  # no new batch after this

        def fill(part: int) -> list[str]:
            conn = Conn(srv, timeout=30)
            conn.deadline = soft + 15
            seen = []
            try:
                for first in range(part, total, 4 * batch):
                    if time.monotonic() > soft:
                        break
                    bases = range(first, min(first + 4 * batch, total), 4)
                    requests = [
                        f"GET {TABLE}?max_len=2&d_model=2&base={1000 + i}&format=npy HTTP/1.1\r\n"
                        "Host: bench\r\n\r\n"
                        for i in bases
                    ]
                    conn.sock.sendall("".join(requests).encode())
                    seen += [str(conn.answer()[0]) for _ in requests]
            except (OSError, ValueError, IndexError) as error:
                seen.append(type(error).__name__)
            finally:
                conn.close()
            return seen

        start = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            seen = [s for part in pool.map(fill, range(4)) for s in part]
        filled = time.monotonic() - start
        listing, health = Conn(srv, timeout=60), Conn(srv, timeout=60)
        listing.deadline = health.deadline = time.monotonic() + 60
        try:
            sent = time.monotonic()
            listing.send("GET", "/v1/cache")
            health.send("GET", "/healthz")
            health_status = health.answer()[0]
            health_time = time.monotonic() - sent
            list_status, _, document = listing.answer(keep=True)
            list_time = time.monotonic() - sent
        finally:
            listing.close()
            health.close()
        stats: dict[str, Any] = json.loads(document) if list_status == 200 else {}
        held = stats.get("tables_total", len(stats.get("entries", [])))
        return (
            f"sent {len(seen)} of {total}"
            + (" (stopped at the 70 s cap)" if len(seen) < total else "")
            + f" in {wide(filled)} (cache holds {held} tables); "
            f"/v1/cache {list_status}: {len(document) / 1e6:.2f} MB in {wide(list_time)}; "
            f"healthz sent with it {health_status} in {wide(health_time)}; held "
            f"{srv.held():+.0f} MiB;{srv.note()} statuses {statuses(seen)}"
        )


# --- round 3: the Open Inference Protocol over gRPC, .npz directories, /v2 outputs, keys ---


def healthz_latencies(srv: Server, done: threading.Event) -> list[float]:
    """``/healthz`` asked every 20 ms until ``done``: each answer's seconds (60 for none)."""
    seen: list[float] = []

    def probe() -> None:
        while not done.is_set():
            seen.append(request(srv, "/healthz", limit=60)[1])
            time.sleep(0.02)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    seen.append(0.0)
    return seen


def grpc_message(checkout: Path | None, cap: float, name: str, message: bytes) -> str:
    """One ModelInfer message, gzip-compressed on the wire: the server's CPU seconds, peak
    and held RSS, and /healthz's slowest answer while it is read."""
    import grpc  # the grpc extra (dev): only these cases need it

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with server(checkout, cap, env={"PE_GRPC_PORT": str(port)}) as srv:
        done = threading.Event()
        latencies = healthz_latencies(srv, done)
        cpu_before = cpu_seconds(srv.pid)
        started = time.monotonic()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            infer: Any = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            try:
                infer(message, timeout=80, compression=grpc.Compression.Gzip)
                status = "OK"
            except grpc.RpcError as error:
                status = error.code().name
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(srv.pid) - cpu_before
        time.sleep(1.0)
        done.set()
        compressed = len(gzip.compress(message))
        return (
            f"{name}: {len(message) / MiB:.0f} MiB ({compressed / 1024:.0f} KiB gzipped): "
            f"{status} in {wide(elapsed)}, {cpu:.2f} CPU s; peak {srv.peak():+.0f} MiB, held "
            f"{srv.held():+.0f} MiB; /healthz at worst {wide(max(latencies))};{srv.note()}"
        )


def grpc_outputs(checkout: Path | None, cap: float) -> str:
    """32 MiB of empty ``outputs`` entries (32 KiB gzipped): 16M messages for protobuf."""
    model = protobuf_field(1, b"sinusoidal")
    return grpc_message(checkout, cap, "outputs", model + protobuf_field(6, b"") * (16 << 20))


def grpc_dims(checkout: Path | None, cap: float) -> str:
    """57 MiB of one input's shape sizes (packed varints of one byte)."""
    model = protobuf_field(1, b"sinusoidal")
    dims = protobuf_field(
        5, protobuf_field(1, b"positions") + protobuf_field(3, b"\x01" * (57 * MiB))
    )
    return grpc_message(checkout, cap, "dims", model + dims)


def lying_npz(declared: int) -> bytes:
    """A ~300-byte .npz whose directory declares its member ``declared`` bytes long."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("embeddings.npy", npy_bytes(np.zeros((2, 8), np.float32)))
    body = bytearray(buffer.getvalue())
    directory = body.rindex(b"PK\x01\x02")
    struct.pack_into("<L", body, directory + 24, declared)
    return bytes(body)


def npz_declared(checkout: Path | None, cap: float) -> str:
    """Four clients post, in a loop, an .npz that declares just under PE_POSTED_BYTES
    (256 MiB, less 512 KiB); an honest client posts 1 MiB applies meanwhile, for 10 s."""
    body = lying_npz(256 * MiB - 512 * 1024)
    honest_body = npy_bytes(np.ones((256, 1024), np.float32))
    with server(checkout, cap) as srv:
        done = threading.Event()

        def liar() -> list[str]:
            seen = []
            while not done.is_set():
                seen.append(request(srv, APPLY, "POST", body, {"Content-Type": NPZ}, 30)[0])
            return seen

        honest: list[str] = []
        with ThreadPoolExecutor(4) as pool:
            liars = [pool.submit(liar) for _ in range(4)]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                sent = request(srv, APPLY, "POST", honest_body, {"Content-Type": NPY}, 30)
                honest.append(sent[0])
            done.set()
            lies = [s for future in liars for s in future.result()]
        served = honest.count("200") / max(len(honest), 1)
        return (
            f"honest 1 MiB applies served {served:.0%} of {len(honest)} "
            f"({statuses(honest)}); the liars' {len(lies)} posts: {statuses(lies)};"
            f"{srv.note()}"
        )


def v2_outputs(checkout: Path | None, cap: float) -> str:
    """A 40 MiB /v2 JSON header of 2M ``outputs`` entries."""
    entries = b",".join([b'{"name":"encodings"}'] * 2_000_000)
    body = (
        b'{"inputs":[{"name":"positions","shape":[1],"datatype":"INT64","data":[0]}],'
        b'"parameters":{"d_model":8},"outputs":[' + entries + b"]}"
    )
    with server(checkout, cap) as srv:
        cpu_before = cpu_seconds(srv.pid)
        status, seconds, _ = request(
            srv, "/v2/models/sinusoidal/infer", "POST", body, {"Content-Type": "application/json"}
        )
        cpu = cpu_seconds(srv.pid) - cpu_before
        return (
            f"{len(body) / MiB:.0f} MiB header: {status} in {wide(seconds)}, {cpu:.2f} CPU s; "
            f"peak {srv.peak():+.0f} MiB, held {srv.held():+.0f} MiB;{srv.note()}"
        )


def key_cost(checkout: Path | None, cap: float) -> str:
    """32 clients each ask one row of a new rounding=exact yarn key at head_dim 16,384 (its
    frequencies in decimal arithmetic) while another asks small cold tables (a new base
    each): the small tables' latency, against the same small tables alone."""
    yarn = (
        "/v1/encodings/rotary?max_len=1&head_dim=16384&rounding=exact&scaling=yarn"
        "&factor=4&original_max_position_embeddings=4096&format=npy&base="
    )

    def small(srv: Server, count: int, first: int) -> list[float]:
        return [
            request(srv, f"{TABLE}?max_len=64&d_model=64&format=npy&base={first + i}")[1]
            for i in range(count)
        ]

    with server(checkout, cap) as srv:
        alone = small(srv, 40, 20_000)
        with ThreadPoolExecutor(32) as pool:
            keys = [pool.submit(request, srv, f"{yarn}{10_000 + i}") for i in range(64)]
            beside = small(srv, 40, 30_000)
            seen = [future.result()[0] for future in keys]
        return (
            f"small cold tables alone: median {statistics.median(alone) * 1e3:.1f} ms, "
            f"max {max(alone) * 1e3:.1f} ms; beside 64 new yarn keys: median "
            f"{statistics.median(beside) * 1e3:.1f} ms, max {max(beside) * 1e3:.1f} ms; "
            f"keys {statuses(seen)};{srv.note()}"
        )


def kubernetes_env() -> dict[str, str]:
    """The Kubernetes deployment's ``PE_*`` settings (``deploy/kubernetes/base/settings.env``)
    but its host and port, which :func:`server` chooses."""
    text = (Path(__file__).resolve().parents[1] / "deploy/kubernetes/base/settings.env").read_text()
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: value for name, value in pairs if name not in ("PE_HOST", "PE_PORT")}


def comparison(width: int, stop: int) -> bytes:
    """A compare of two sinusoidal tables ``width`` wide (bases 10,000 and 20,000) over
    positions ``0 .. stop-1``: about 170 bytes."""
    a = {"family": "sinusoidal", "parameters": {"d_model": width}}
    b = {"family": "sinusoidal", "parameters": {"d_model": width, "base": 20000}}
    return json.dumps({"a": a, "b": b, "stop": stop}).encode()


def compare_one(checkout: Path | None, cap: float, fmt: str) -> str:
    """One compare of two 65,536-wide tables over 512 positions (the default settings'
    largest), as ``fmt``: its peak and held RSS."""
    with server(checkout, cap) as srv:
        status, seconds, size = request(
            srv, f"/v1/compare?format={fmt}", "POST", comparison(65536, 512), JSON_TYPE
        )
        return (
            f"{fmt}: {status} in {wide(seconds)} ({size / 1024:.0f} KiB); peak "
            f"{srv.peak():+.0f} MiB, held {srv.held():+.0f} MiB;{srv.note()}"
        )


def compare_png(checkout: Path | None, cap: float) -> str:
    """One compare as a PNG, then 32 at once under the Kubernetes deployment's settings
    (two 16,384-wide tables over 512 positions, the most its PE_MAX_ELEMENTS allows): the
    peak RSS against the pod's 1,984 MiB, and /healthz meanwhile."""
    alone = compare_one(checkout, cap, "png")
    with server(checkout, cap, env=kubernetes_env()) as srv:
        done = threading.Event()
        latencies = healthz_latencies(srv, done)
        body = comparison(16384, 512)

        def picture(_: int) -> str:
            return request(srv, "/v1/compare?format=png", "POST", body, JSON_TYPE, 600)[0]

        started = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            seen = list(pool.map(picture, range(32)))
        elapsed = time.monotonic() - started
        done.set()
        return (
            f"{alone} 32 at once (Kubernetes settings): {statuses(seen)} in {wide(elapsed)}; "
            f"peak {srv.peak():+.0f} MiB (RSS {srv.idle + srv.peak():.0f} MiB, the pod's limit "
            f"2176), held {srv.held():+.0f} MiB; /healthz p50 "
            f"{statistics.median(latencies) * 1e3:.0f} ms, max {wide(max(latencies))};{srv.note()}"
        )


def compare_json(checkout: Path | None, cap: float) -> str:
    """One compare as JSON: its peak and held RSS."""
    return compare_one(checkout, cap, "json")


# a width-1 audit: every position to 2^21 evaluated, its plan np.union1d of 2^21 positions
AUDIT_HEAD: Final = "/v1/audit/sinusoidal?max_len=2097152&d_model=1&paths=library&base="
# the same base in other words: the replay layer keys on the query string's text
SPELLINGS: Final = ("10000.0", "1e4", "10000.00", "1.0e4", "1E4", "10000.000", "0.1e5", "100e2")
# an audit whose dense first-crossing scans reach 3,355,445 for six paths
AUDIT_SCAN: Final = "/v1/audit/rotary?max_len=4194304&head_dim=2&scaling=linear&factor=0.1&base="


def kubernetes() -> dict[str, str]:
    """The settings of deploy/kubernetes (settings.env), but the address, the log lines and
    the preload (a server of its own here, started quickly)."""
    path = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes" / "base" / "settings.env"
    lines = [line.partition("=") for line in path.read_text().splitlines() if "=" in line]
    kept = {name: value for name, _, value in lines if not name.startswith("#")}
    for name in ("PE_HOST", "PE_PORT", "PE_LOG_LEVEL", "PE_LOG_FORMAT", "PE_PRELOAD"):
        kept.pop(name, None)
    return kept


def latencies(seen: list[float]) -> str:
    """The median and largest of ``/healthz``'s latencies (the first is the probe's 0)."""
    answered = seen[1:] or [0.0]
    return f"p50 {statistics.median(answered) * 1e3:.0f} ms, max {max(answered) * 1e3:.0f} ms"


def resending(srv: Server, clients: int, seconds: float) -> tuple[list[float], list[str]]:
    """``clients`` re-send the cached ``AUDIT_HEAD`` with its tag and the base spelled each
    way in turn, as fast as they are answered, for ``seconds``: ``/healthz``'s latencies
    meanwhile and the audits' statuses."""
    first = httpx.get(srv.url + AUDIT_HEAD + "10000", timeout=300)
    tag = {"If-None-Match": first.headers.get("etag", "")}
    done, answers = threading.Event(), []

    def resend(offset: int) -> None:
        for turn in range(1_000_000):
            if done.is_set():
                return
            base = SPELLINGS[(offset + turn) % len(SPELLINGS)]
            answers.append(request(srv, AUDIT_HEAD + base, headers=tag, limit=60)[0])

    probed = healthz_latencies(srv, done)
    threads = [threading.Thread(target=resend, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    done.set()
    for thread in threads:
        thread.join()
    return probed, answers


def audit_304(checkout: Path | None, cap: float) -> str:
    """Clients re-send a cached width-1 audit for 20 s with query strings that name the same
    table in other words (``base=10000``, ``10000.0``, ``1e4``, ...: each answer a 304):
    ``/healthz``'s latency meanwhile, 4 clients with the defaults and 2 with the Kubernetes
    settings (its liveness probe times out at 3 s)."""
    parts = []
    for label, env, clients in (("defaults", {}, 4), ("kubernetes", kubernetes(), 2)):
        with server(checkout, cap, env=env) as srv:
            probed, answers = resending(srv, clients, 20)
            parts.append(
                f"{label}, {clients} clients: /healthz {latencies(probed)} over "
                f"{len(probed) - 1} probes; audits {statuses(answers)}{srv.note()}"
            )
    return "; ".join(parts)


def audit_scan(checkout: Path | None, cap: float) -> str:
    """An audit whose dense first-crossing scans are long (``AUDIT_SCAN``): (a) the server's
    CPU seconds for one; (b) six at once (distinct bases), and a cold 64 x 64 table asked
    0.3 s later: how long it waits; (c) four clients asking small cold audits in a loop
    (2,048 positions of 128 entries: 2^18 numbers charged before, the quick lane), and
    one-row cold tables beside them, against the same tables alone."""
    parts = []
    with server(checkout, cap) as srv:
        before = cpu_seconds(srv.pid)
        status, seconds, _ = request(srv, AUDIT_SCAN + "31", limit=300)
        spent = cpu_seconds(srv.pid) - before
        parts.append(f"(a) one: {status} in {wide(seconds)}, {spent:.1f} CPU s{srv.note()}")
    with server(checkout, cap) as srv, ThreadPoolExecutor(6) as pool:
        audits = [pool.submit(request, srv, AUDIT_SCAN + str(b), limit=300) for b in range(32, 38)]
        time.sleep(0.3)
        status, seconds, _ = request(srv, f"{TABLE}?max_len=64&d_model=64&format=npy&base=7")
        done = [future.result() for future in audits]
        parts.append(
            f"(b) a cold table behind six: {status} in {wide(seconds)} (the audits: "
            f"{statuses(s for s, _, _ in done)}, the last in {wide(max(t for _, t, _ in done))})"
            f"{srv.note()}"
        )

    def one_rows(srv: Server, first: int) -> list[float]:
        return [
            request(srv, f"{TABLE}?max_len=1&d_model=64&format=npy&base={first + i}")[1]
            for i in range(40)
        ]

    with server(checkout, cap) as srv:
        alone = one_rows(srv, 20_000)
        stop, answers = threading.Event(), []

        def small(first: int) -> None:
            for base in range(first, first + 100_000):
                if stop.is_set():
                    return
                query = f"/v1/audit/rotary?max_len=2048&head_dim=128&base={base}"
                answers.append(request(srv, query, limit=120)[0])

        with ThreadPoolExecutor(4) as pool:
            for client in range(4):
                pool.submit(small, 40_000 + 100_000 * client)
            time.sleep(1)
            beside = one_rows(srv, 30_000)
            stop.set()
        parts.append(
            f"(c) one-row cold tables alone: p50 {statistics.median(alone) * 1e3:.0f} ms; "
            f"beside 4 clients of small audits: p50 {statistics.median(beside) * 1e3:.0f} ms, "
            f"max {max(beside) * 1e3:.0f} ms (audits {statuses(answers)}){srv.note()}"
        )
    return "; ".join(parts)


CASES: Final[dict[str, Callable[[Path | None, float], str]]] = {
    "body-reservation": body_reservation,
    "json-strings": json_strings,
    "frequency-cache": frequency_cache,
    "accept-headers": accept_headers,
    "similarity-wide": similarity_wide,
    "cpu": cpu,
    "slow-readers": slow_readers,
    "labels": labels,
    "cache-listing": cache_listing,
    "grpc-outputs": grpc_outputs,
    "grpc-dims": grpc_dims,
    "npz-declared": npz_declared,
    "v2-outputs": v2_outputs,
    "key-cost": key_cost,
    "compare-png": compare_png,
    "compare-json": compare_json,
    "audit-304": audit_304,
    "audit-scan": audit_scan,
}


def describe(where: Path) -> str:
    """The commit of ``where`` and how many files under service/ differ from it (read only)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "log", "-1", "--format=%h"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--", "service"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return str(where)
    return f"{where} at {commit}, {len(changed)} uncommitted file(s) under service/"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkout", type=Path, default=None)
    parser.add_argument("--only", action="append", choices=list(CASES), metavar="NAME")
    parser.add_argument("--rss-cap", type=float, default=12288.0, help="MiB (default 12288)")
    args = parser.parse_args()
    where = args.checkout or Path(__file__).resolve().parents[1]
    print(f"server from {describe(where)}; {datetime.datetime.now():%Y-%m-%d %H:%M:%S}", flush=True)
    for name in args.only or CASES:
        started = time.monotonic()
        try:
            line = CASES[name](args.checkout, args.rss_cap)
        except Exception as error:  # a case that breaks reports it and the others still run
            line = f"FAILED: {type(error).__name__}: {error}"
        print(f"{name}: {line} [{time.monotonic() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()

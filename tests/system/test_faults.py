"""Faults: SIGTERM while requests are in flight."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest

from tests.support import WAIT, serving

pytestmark = pytest.mark.slow

TABLE = "/v1/encodings/sinusoidal"


def test_sigterm_during_load_lets_every_in_flight_request_finish() -> None:
    outcomes: list[tuple[float, float, int | str]] = []  # start, end, status or error
    stop = threading.Event()
    with serving({"PE_CACHE_BYTES": str(64 << 20)}) as (url, process):

        def client(worker: int) -> None:
            with httpx.Client(base_url=url, timeout=WAIT) as http:
                for i in range(1000):
                    if stop.is_set():
                        return
                    base = 2 + worker * 1000 + i
                    query = f"?max_len=2048&d_model=2048&dtype=float64&base={base}&format=npy"
                    start = time.monotonic()
                    try:
                        result: int | str = http.get(TABLE + query).status_code
                    except httpx.TransportError as exc:
                        result = repr(exc)
                    outcomes.append((start, time.monotonic(), result))
                    if isinstance(result, str):
                        return

        threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        stop.set()
        for thread in threads:
            thread.join(60)
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    # A request the client sent just before the signal may still sit unread in the socket
    # when uvicorn closes the connections that have no request in progress; the kernel then
    # resets it. With eight busy client threads and a busy event loop that window has been
    # seen to reach past 10 ms, so only requests sent 100 ms before the signal count as in
    # flight (a request here takes longer than that, so there are still several).
    sent = signalled - 0.1
    in_flight = [o for o in outcomes if o[0] < sent < o[1]]
    before = [o for o in outcomes if o[0] < sent]
    print(f"\nSIGTERM: {len(before)} requests sent before it, {len(in_flight)} in flight at it")
    assert len(in_flight) >= 4
    assert [status for _, _, status in before] == [200] * len(before)

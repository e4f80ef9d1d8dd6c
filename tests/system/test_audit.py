"""The audit against a real server: audits re-sent with query strings that name a cached
one in other words (``base=10000``, ``10000.0``, ``1e4``: the replay layer keys on the
text) are answered 304 from their parameters, without holding the event loop."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support import serving

pytestmark = pytest.mark.slow

# width 1: every position to 2^21 is evaluated, the plan np.union1d of 2^21 positions
AUDIT = "/v1/audit/sinusoidal?max_len=2097152&d_model=1&paths=library&base="
SPELLINGS = ["10000.0", "1e4", "10000.00", "1.0e4", "1E4", "10000.000", "0.1e5", "100e2"]


def loop_seconds(pid: int) -> float:
    """The CPU time of the process's main thread, where its event loop runs (its lanes are
    other threads): a measure of work done on the loop that a loaded machine does not
    inflate, as it would a latency."""
    stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def test_re_sent_audits_do_not_hold_the_event_loop() -> None:
    """Eight re-sent audits at once, /healthz asked meanwhile: each planned 2^21 positions
    on the loop before its 304 (1.5-5 CPU s each: /healthz waited seconds, past a liveness
    probe's timeout); now the loop spends a few milliseconds on all of them."""
    with serving({"PE_LOG_LEVEL": "warning"}) as (url, process):
        first = httpx.get(url + AUDIT + "10000", timeout=300)
        assert first.status_code == 200, first.text
        tag = {"if-none-match": first.headers["etag"]}
        healthz: list[int] = []
        done, answered = threading.Event(), threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=url, timeout=300) as client:
                while not done.wait(0.01):
                    healthz.append(client.get("/healthz").status_code)
                    answered.set()

        def resend(base: str) -> int:
            return httpx.get(url + AUDIT + base, headers=tag, timeout=300).status_code

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            assert answered.wait(60)
            before = loop_seconds(process.pid)
            with ThreadPoolExecutor(len(SPELLINGS)) as pool:
                statuses = list(pool.map(resend, SPELLINGS))
            spent = loop_seconds(process.pid) - before
        finally:
            done.set()
            prober.join()
    assert statuses == [304] * len(SPELLINGS)
    assert set(healthz) == {200}
    # 8 plans on the loop were 12 CPU s or more; parsing and tagging 8 requests is ms
    assert spent < 1.0, f"the event loop spent {spent:.2f} CPU s on 8 re-sent audits"

"""The service as a process: ``python -m service`` and the console script, several
workers, readiness after a large preload, access-log lines, SIGTERM during a request."""

from __future__ import annotations

import datetime
import json
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import TABLE, running, serving

pytestmark = pytest.mark.slow


def test_the_console_script_starts_the_service() -> None:
    script = shutil.which("pe-service", path=str(Path(sys.executable).parent))
    assert script is not None
    with running(command=[script]) as url:
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}


def test_several_workers_serve() -> None:
    with running({"PE_WORKERS": "2"}) as url:
        for _ in range(10):
            assert (
                httpx.get(url + "/v1/encodings/sinusoidal?max_len=4&d_model=4").status_code == 200
            )


def test_readyz_waits_for_the_preload() -> None:
    """Alive at once, ready only when every PE_PRELOAD table is in the cache."""
    env = {"PE_PRELOAD": "16x8, 8192x8192:float64", "PE_CACHE_BYTES": str(600 << 20)}
    seen = []
    with running(env) as url:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(url + "/readyz").status_code
            seen.append(status)
            if status == 200:
                break
            assert status == 503
            assert httpx.get(url + "/healthz").status_code == 200
            time.sleep(0.02)
        stats = httpx.get(url + "/v1/cache").json()
    assert seen[0] == 503
    assert seen[-1] == 200
    tables = {(t["key"]["d_model"], t["key"]["dtype"]): t for t in stats["tables"]}
    assert tables.keys() == {(8, "float32"), (8192, "float64")}
    wide = tables[8192, "float64"]
    assert wide["pages"] * wide["page_rows"] == 8192  # every row of the preloaded table
    assert stats["misses"] == 1 + wide["pages"]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_one_access_log_line_per_request(tmp_path: Path, log_format: str) -> None:
    log = tmp_path / "server.log"
    with running({"PE_LOG_FORMAT": log_format}, log_path=log) as url:
        httpx.get(url + TABLE + "?max_len=3&d_model=3&format=npy")
        httpx.get(url + "/nope")
    lines = [line for line in log.read_text().splitlines() if TABLE in line or "/nope" in line]
    assert len(lines) == 2
    if log_format == "json":
        records = [json.loads(line) for line in log.read_text().splitlines()]  # every line
        access = [r for r in records if r["logger"] == "service.access"]
        assert [(r["path"], r["status"]) for r in access if r["path"] != "/healthz"] == [
            (TABLE, 200),
            ("/nope", 404),
        ]
        assert access[-1]["route"] == "unmatched"
        assert all(r["duration_ms"] >= 0 and r["bytes"] > 0 for r in access)
        # every line's time is ISO 8601 with its zone, access lines and the others alike
        for record in records:
            moment = datetime.datetime.fromisoformat(record["time"])
            assert moment.utcoffset() is not None, record["time"]
            assert moment.microsecond % 1000 == 0  # milliseconds
    else:
        assert '"GET /v1/encodings/sinusoidal?max_len=3&d_model=3&format=npy" 200' in lines[0]
        assert '"GET /nope" 404' in lines[1]


def test_sigterm_lets_in_flight_requests_finish() -> None:
    """A slow cold table is in flight when SIGTERM arrives: it is answered in full, then the
    process exits cleanly."""
    results: list[httpx.Response] = []
    with serving({"PE_CACHE_BYTES": str(1 << 30)}) as (url, process):
        query = "?max_len=8192&d_model=8192&dtype=float64&format=npy"
        slow = threading.Thread(
            target=lambda: results.append(httpx.get(url + TABLE + query, timeout=60))
        )
        slow.start()
        time.sleep(0.3)  # the request is being computed
        process.send_signal(signal.SIGTERM)
        slow.join(60)
        # uvicorn re-raises the signal once it has shut down cleanly
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert results[0].status_code == 200
    assert len(results[0].content) > 8192 * 8192 * 8
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz")

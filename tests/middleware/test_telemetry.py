"""Telemetry: metrics by route and status, the cache's metrics, access-log lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.metrics import RequestStats
from service.middleware.telemetry import format_access
from service.settings import Settings
from tests.support import (
    NPY,
    ROOT,
    ROTARY_APPLY,
    TABLE,
    WAIT,
    cache_stats,
    free_port,
    npy_bytes,
)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"{name} {labels} not in metrics")


def test_metrics_count_requests_by_route_and_status(api: httpx.Client) -> None:
    before = api.get("/metrics").text
    route = {"method": "GET", "route": TABLE}
    start = {s: _or_zero(before, status=s, **route) for s in ("200", "422")}
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    start_404 = _or_zero(before, **unmatched)
    start_count = _or_zero(before, "pe_http_request_duration_seconds_count", status="200", **route)
    for _ in range(3):
        assert api.get(TABLE + "?max_len=5&d_model=5").status_code == 200
    assert api.get(TABLE + "?max_len=0&d_model=5").status_code == 422
    api.get("/no/such/path")
    response = api.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert metric(text, "pe_http_requests_total", status="200", **route) == start["200"] + 3
    assert metric(text, "pe_http_requests_total", status="422", **route) == start["422"] + 1
    assert metric(text, "pe_http_requests_total", **unmatched) == start_404 + 1
    count = metric(text, "pe_http_request_duration_seconds_count", status="200", **route)
    assert count == start_count + 3


def _or_zero(text: str, name: str = "pe_http_requests_total", **labels: str) -> float:
    try:
        return metric(text, name, **labels)
    except AssertionError:
        return 0.0


def test_metrics_show_the_cache(api: httpx.Client) -> None:
    api.get(TABLE + "?max_len=7&d_model=3&base=17")
    api.get(TABLE + "?max_len=7&d_model=3&base=17")
    text = api.get("/metrics").text
    stats = cache_stats(api)
    assert metric(text, "pe_cache_hits_total") == stats["hits"]
    assert metric(text, "pe_cache_misses_total") == stats["misses"]
    assert metric(text, "pe_cache_evictions_total") == stats["evictions"]
    assert metric(text, "pe_cache_bytes") == stats["bytes"]
    assert metric(text, "pe_cache_budget_bytes") == stats["budget_bytes"]
    assert metric(text, "pe_cache_entries") == stats["tables_total"]
    assert metric(text, "pe_cache_pages") >= sum(t["pages"] for t in stats["tables"])


RECORD = {
    "time": "2026-01-02 03:04:05.006",
    "client": "1.2.3.4:5",
    "method": "GET",
    "path": "/x",
    "query": "a=1",
    "status": 200,
    "bytes": 10,
    "duration_ms": 1.5,
}


def test_text_access_line() -> None:
    record = RECORD
    line = '2026-01-02 03:04:05.006 1.2.3.4:5 "GET /x?a=1" 200 10B 1.5ms'
    assert format_access(record, as_json=False) == line
    assert json.loads(format_access(record, as_json=True)) == record


def test_a_text_line_cannot_be_forged() -> None:
    record = {
        **RECORD,
        "path": '/x" 200 1B 1ms\n2026-01-02 03:04:05.007 6.6.6.6:6 "GET /admin',
        "query": "a=\x1b]0;title\x07",
        "status": 404,
    }
    line = format_access(record, as_json=False)
    assert line.isprintable()
    assert line.count('"') == 2
    assert line.endswith('?a=\\x1b]0;title\\x07" 404 10B 1.5ms')
    assert json.loads(format_access(record, as_json=True)) == record


def test_latency_buckets_are_cumulative() -> None:
    stats = RequestStats()
    for seconds in (0.0001, 0.003, 0.003, 20.0):
        stats.observe("GET", "/x", 200, seconds)
    families = {family.name: family for family in stats.collect()}
    samples = {
        (s.name, s.labels.get("le")): s.value
        for s in families["pe_http_request_duration_seconds"].samples
    }
    assert samples[("pe_http_request_duration_seconds_bucket", "0.0005")] == 1
    assert samples[("pe_http_request_duration_seconds_bucket", "0.005")] == 3
    assert samples[("pe_http_request_duration_seconds_bucket", "10.0")] == 3
    assert samples[("pe_http_request_duration_seconds_bucket", "+Inf")] == 4
    assert samples[("pe_http_request_duration_seconds_count", None)] == 4
    assert samples[("pe_http_request_duration_seconds_sum", None)] == pytest.approx(20.0061)
    assert families["pe_http_requests"].samples[0].value == 4


def test_route_labels_come_from_a_closed_set(api: httpx.Client) -> None:
    """Labels are the app's route templates (and its framework pages), or "unmatched":
    paths a client makes up, including those answered with a redirect, are not labels."""
    for i in range(20):
        api.get(f"/explorer/{i}/")  # a trailing slash: redirected
        api.get(f"/healthz/{i}")
        api.get(f"/made-up-{i}/")
    api.get("/docs")
    text = api.get("/metrics").text
    templates = paths_of(create_app(Settings()).routes)
    routes = {
        sample.labels["route"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "route" in sample.labels
    }
    assert "/docs" in routes
    assert routes <= templates | {"unmatched"}


def paths_of(routes: Any) -> set[str]:
    """Every route template of an app: its own and its included routers' (those made as
    the app is, as the compare route, too)."""
    found: set[str] = set()
    for route in routes:
        if isinstance(getattr(route, "path", None), str):
            found.add(route.path)
        included = getattr(route, "original_router", None)
        if included is not None:
            found |= paths_of(included.routes)
    return found


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of ``text`` as the JSON object it must be."""
    records = []
    for line in text.splitlines():
        if line.strip():
            record = json.loads(line)  # a line that is not JSON fails here, shown
            assert isinstance(record, dict), line
            records.append(record)
    return records


@pytest.mark.slow  # a process's log: the full run's
def test_python_warnings_are_log_records() -> None:
    """With PE_LOG_FORMAT=json a warning (numpy's RuntimeWarning on an overflowing cast, a
    UserWarning) is one JSON record of the py.warnings logger, as is any other library's
    record: nothing reaches standard error as free text."""
    code = """if True:
        import logging, logging.config, warnings
        import numpy as np
        from service.__main__ import log_config
        from service.settings import Settings
        logging.config.dictConfig(log_config(Settings(log_format="json")))
        np.array([1e6], np.float32).astype(np.float16)
        warnings.warn("a warning", UserWarning)
        logging.getLogger("asyncio").error("a library's error")
    """
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    records = json_lines(done.stderr)
    assert [(r["logger"], r["level"]) for r in records] == [
        ("py.warnings", "warning"),
        ("py.warnings", "warning"),
        ("asyncio", "error"),
    ]
    assert "RuntimeWarning: overflow encountered in cast" in records[0]["message"]
    assert "UserWarning: a warning" in records[1]["message"]


# Requests that made numpy warn (float16 casts that overflow, angles that are not finite):
# answered, or refused with a 422, each must leave only JSON lines behind.
_WARNED: list[tuple[str, str, np.ndarray[Any, Any] | None]] = [
    ("GET", f"{TABLE}?max_len=4&d_model=8&preset=mlx&scale=1e6&dtype=float16", None),
    ("GET", f"{TABLE}?max_len=4&d_model=8&preset=tensor2tensor&min_timescale=1e30", None),
    (
        "GET",
        "/v1/encodings/rotary?max_len=4&head_dim=8&dtype=float16&scaling=yarn&factor=2"
        "&original_max_position_embeddings=4&attention_factor=1000",
        None,
    ),
    (
        "POST",
        f"{ROTARY_APPLY}?scaling=yarn&factor=2&original_max_position_embeddings=4"
        "&attention_factor=1000",
        np.full((3, 8), 1000, np.float16),
    ),
    ("POST", ROTARY_APPLY, np.full((3, 8), 60000, np.float16)),
    ("POST", f"{TABLE}/apply?scale=1e6", np.full((3, 8), 1000, np.float16)),
]


# a real server, the full run's: test_python_warnings_are_log_records checks the same
# logging configuration in a process in the fast loop
@pytest.mark.slow
def test_every_line_of_a_json_logging_process_is_json(tmp_path: Path) -> None:
    """A real ``python -m service`` with PE_LOG_FORMAT=json (the Kubernetes default): after
    requests that made numpy warn, every line it wrote, on standard error and standard
    output, is one JSON object; the warnings, if any, are py.warnings records."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PE_")},
        "PE_HOST": "127.0.0.1",
        "PE_PORT": str(port),
        "PE_LOG_FORMAT": "json",
    }
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "service"], env=env, cwd=ROOT, stdout=stdout, stderr=stderr
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if http.get("/healthz").status_code == 200:
                            break
                    except httpx.TransportError:
                        assert process.poll() is None, err.read_text()
                        assert time.monotonic() < deadline, "the service did not start"
                        time.sleep(0.05)
                for method, path, array in _WARNED:
                    body = None if array is None else npy_bytes(array)
                    response = http.request(
                        method, path, content=body, headers={"content-type": NPY}
                    )
                    assert response.status_code in (200, 422), (path, response.text)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    records = json_lines(err.read_text())
    assert any(r["logger"].startswith("uvicorn") for r in records)  # it did log there
    warned = [r for r in records if "Warning" in r["message"]]
    assert all(r["logger"] == "py.warnings" and r["level"] == "warning" for r in warned)
    assert json_lines(out.read_text())  # the access log

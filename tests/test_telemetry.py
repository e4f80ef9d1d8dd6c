"""Operations: metrics, access logs, gzip, graceful shutdown."""

from __future__ import annotations

import gzip
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service import codecs
from service.telemetry import RequestStats, format_access
from tests.conftest import running, serving

TABLE = "/v1/encodings/sinusoidal"


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"{name} {labels} not in metrics")


def test_metrics_count_requests_by_route_and_status(api: Any) -> None:
    before = api.get("/metrics").text
    route = {"method": "GET", "route": TABLE}
    start = {s: _or_zero(before, status=s, **route) for s in ("200", "422")}
    for _ in range(3):
        assert api.get(TABLE + "?max_len=5&d_model=5").status_code == 200
    assert api.get(TABLE + "?max_len=0&d_model=5").status_code == 422
    api.get("/no/such/path")
    response = api.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert metric(text, "pe_http_requests_total", status="200", **route) == start["200"] + 3
    assert metric(text, "pe_http_requests_total", status="422", **route) == start["422"] + 1
    assert (
        metric(text, "pe_http_requests_total", method="GET", route="unmatched", status="404") >= 1
    )
    count = metric(text, "pe_http_request_duration_seconds_count", status="200", **route)
    assert count >= 3


def _or_zero(text: str, **labels: str) -> float:
    try:
        return metric(text, "pe_http_requests_total", **labels)
    except AssertionError:
        return 0.0


def test_metrics_show_the_cache(api: Any) -> None:
    api.get(TABLE + "?max_len=7&d_model=3&base=17")
    api.get(TABLE + "?max_len=7&d_model=3&base=17")
    text = api.get("/metrics").text
    stats = api.get("/v1/cache").json()
    assert metric(text, "pe_cache_hits_total") == stats["hits"]
    assert metric(text, "pe_cache_misses_total") == stats["misses"]
    assert metric(text, "pe_cache_evictions_total") == stats["evictions"]
    assert metric(text, "pe_cache_bytes") == stats["bytes"]
    assert metric(text, "pe_cache_budget_bytes") == stats["budget_bytes"]
    assert metric(text, "pe_cache_entries") == len(stats["entries"])


@pytest.mark.parametrize("accept_encoding", ["gzip", "gzip, deflate, br", "*"])
def test_json_is_gzipped_when_the_client_accepts_it(api: Any, accept_encoding: str) -> None:
    url = TABLE + "?max_len=64&d_model=32&format=json"
    plain = api.get(url, headers={"accept-encoding": "identity"})
    packed = api.get(url, headers={"accept-encoding": accept_encoding})
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.num_bytes_downloaded < plain.num_bytes_downloaded / 2
    assert packed.content == plain.content  # the client inflates it
    assert packed.headers["etag"] != plain.headers["etag"]  # another representation
    assert "Accept-Encoding" in packed.headers["vary"]
    again = api.get(
        url, headers={"accept-encoding": "gzip", "if-none-match": packed.headers["etag"]}
    )
    assert again.status_code == 304


@pytest.mark.parametrize("fmt", ["npy", "raw"])
def test_binary_is_never_gzipped(api: Any, fmt: str) -> None:
    response = api.get(
        f"{TABLE}?max_len=64&d_model=32&format={fmt}", headers={"accept-encoding": "gzip"}
    )
    assert "content-encoding" not in response.headers


def test_apply_json_is_gzipped_too(api: Any) -> None:
    body = orjson.dumps({"embeddings": np.zeros((16, 16)).tolist()})
    headers = {"content-type": "application/json", "accept-encoding": "gzip"}
    response = api.post(TABLE + "/apply", content=body, headers=headers)
    assert response.headers["content-encoding"] == "gzip"
    assert response.json()["shape"] == [16, 16]


def test_small_json_is_not_worth_gzipping(api: Any) -> None:
    response = api.get(TABLE + "?max_len=2&d_model=2", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in response.headers


def test_gzipped_bytes_are_a_real_gzip_stream() -> None:
    headers, body = codecs.gzipped({"content-type": "application/json"}, b"[1.0]" * 100)
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == b"[1.0]" * 100


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
    assert codecs.accepts_gzip(header) is accepted


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
    else:
        assert '"GET /v1/encodings/sinusoidal?max_len=3&d_model=3&format=npy" 200' in lines[0]
        assert '"GET /nope" 404' in lines[1]


def test_text_access_line() -> None:
    record = {
        "time": "2026-01-02 03:04:05.006",
        "client": "1.2.3.4:5",
        "method": "GET",
        "path": "/x",
        "query": "a=1",
        "status": 200,
        "bytes": 10,
        "duration_ms": 1.5,
    }
    line = '2026-01-02 03:04:05.006 1.2.3.4:5 "GET /x?a=1" 200 10B 1.5ms'
    assert format_access(record, as_json=False) == line
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

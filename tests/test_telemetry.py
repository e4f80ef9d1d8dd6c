"""Telemetry: metrics by route and status, the cache's metrics, access-log lines."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.metrics import RequestStats
from service.routes import ROUTERS
from service.settings import Settings
from service.telemetry import format_access, printable
from tests.support import TABLE, cache_stats


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


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        pytest.param("/v1/x", "/v1/x", id="plain"),
        pytest.param("/caf\u00e9 \u4e2d", "/caf\u00e9 \u4e2d", id="printable-unicode"),
        pytest.param("/a\nforged line", "/a\\x0aforged line", id="newline"),
        pytest.param("/a\r\t", "/a\\x0d\\x09", id="return-and-tab"),
        pytest.param("/\x1b[2J", "/\\x1b[2J", id="terminal-escape"),
        pytest.param("/\x85\x9b", "/\\x85\\x9b", id="c1-controls"),
        pytest.param("/\u2028\u202e", "/\\u2028\\u202e", id="separator-and-bidi"),
        pytest.param('/"x" \\', "/\\x22x\\x22 \\x5c", id="quote-and-backslash"),
    ],
)
def test_what_clients_send_is_escaped_in_text_lines(sent: str, logged: str) -> None:
    assert printable(sent) == logged


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
    app = create_app(Settings())
    framework = {getattr(route, "path", None) for route in app.routes}
    templates = {route.path for router in ROUTERS for route in router.routes} | framework  # type: ignore[attr-defined]
    routes = {
        sample.labels["route"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "route" in sample.labels
    }
    assert "/docs" in routes
    assert routes <= templates | {"unmatched"}

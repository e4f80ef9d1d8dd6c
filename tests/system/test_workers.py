"""Several worker processes, one view: a real ``python -m service`` with ``PE_WORKERS=2``,
scraped as Prometheus would scrape it, each request on a connection of its own so that the
kernel hands them to either worker."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import APPLY, TABLE, WAIT, npy_bytes, serving

pytestmark = pytest.mark.slow
CACHE_BYTES = 64 << 20
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str, **kwargs: object) -> httpx.Response:
    """One request on a new connection (either worker may take it)."""
    with httpx.Client(timeout=WAIT) as http:
        return http.get(url, **kwargs)  # type: ignore[arg-type]


def scrape(url: str) -> Samples:
    """Every sample of ``/metrics``, by name and labels."""
    response = get(url + "/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def counted(samples: Samples) -> Samples:
    """The samples that may only grow: counters and the histogram's counts and sums."""
    return {
        key: value
        for key, value in samples.items()
        if key[0].endswith(("_total", "_count", "_sum", "_bucket"))
    }


def requests_of(samples: Samples, route: str) -> float:
    return sum(
        value
        for (name, labels), value in samples.items()
        if name == "pe_http_requests_total" and ("route", route) in labels
    )


def workers_seen(url: str, tries: int = 200) -> set[int]:
    """The process ids /v1/cache names, until two are seen (or ``tries`` connections)."""
    seen: set[int] = set()
    for _ in range(tries):
        document = get(url + "/v1/cache").json()
        assert document["workers"] == 2
        seen.add(document["worker"])
        if len(seen) == 2:
            break
    return seen


@pytest.fixture(scope="module")
def metrics_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tmp")


@pytest.fixture(scope="module")
def two_workers(metrics_dir: Path) -> Iterator[str]:
    env = {"PE_WORKERS": "2", "PE_CACHE_BYTES": str(CACHE_BYTES), "TMPDIR": str(metrics_dir)}
    with serving(env) as (url, _):
        yield url


def test_both_workers_answer_and_cache_says_which(two_workers: str) -> None:
    assert len(workers_seen(two_workers)) == 2


def test_counters_never_go_backwards_over_twenty_scrapes(two_workers: str) -> None:
    body = npy_bytes(np.zeros((2, 8, 16), "float32"))
    before = requests_of(scrape(two_workers), TABLE)
    previous = counted(scrape(two_workers))
    sent = 0
    for round_ in range(20):
        for d_model in (8, 16, 8 + 2 * round_):  # repeats, and one new table a round
            assert get(two_workers + TABLE, params={"max_len": 64, "d_model": d_model}).is_success
            sent += 1
        with httpx.Client(timeout=WAIT) as http:
            headers = {"content-type": "application/x-npy", "accept": "application/x-npy"}
            assert http.post(two_workers + APPLY, content=body, headers=headers).is_success
        current = counted(scrape(two_workers))
        went_back = {
            key: (previous[key], value)
            for key, value in current.items()
            if key in previous and value < previous[key]
        }
        assert not went_back, f"round {round_}: counters went backwards: {went_back}"
        assert previous.keys() <= current.keys(), "a series disappeared"
        previous = current
    # every request counted, whichever worker answered it
    assert requests_of(scrape(two_workers), TABLE) - before == sent


def test_the_cache_figures_are_the_whole_groups(two_workers: str) -> None:
    time.sleep(1.5)  # each worker writes its cache's figures once a second
    samples = scrape(two_workers)
    assert samples[("pe_cache_budget_bytes", ())] == 2 * CACHE_BYTES
    assert samples[("pe_cache_misses_total", ())] >= 1


def test_a_worker_that_dies_takes_no_counts_with_it(two_workers: str) -> None:
    """uvicorn replaces a killed worker; what the killed one counted stays counted, and its
    gauges give way to its replacement's."""
    for d_model in (4, 6, 10):
        get(two_workers + TABLE, params={"max_len": 32, "d_model": d_model})
    time.sleep(1.5)
    before = counted(scrape(two_workers))
    victim = get(two_workers + "/v1/cache").json()["worker"]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        seen = workers_seen(two_workers, tries=40)
        if len(seen) == 2 and victim not in seen:
            break
        assert time.monotonic() < deadline, f"no replacement for worker {victim}: {seen}"
        time.sleep(0.5)
    time.sleep(1.5)
    after = scrape(two_workers)
    lost = {
        key: (value, after.get(key, 0.0))
        for key, value in before.items()
        if after.get(key, 0.0) < value
    }
    assert not lost, f"counts lost with the killed worker: {lost}"
    assert after[("pe_cache_budget_bytes", ())] == 2 * CACHE_BYTES


def test_the_metrics_directory_goes_with_the_server(metrics_dir: Path) -> None:
    env = {"PE_WORKERS": "2", "TMPDIR": str(metrics_dir / "other")}
    (metrics_dir / "other").mkdir()
    with serving(env) as (url, _):
        get(url + "/healthz")
        made = list((metrics_dir / "other").iterdir())
        assert [path.name[:11] for path in made] == ["pe-metrics-"]
        assert any(made[0].glob("counter_*.db"))
    assert not any((metrics_dir / "other").iterdir())

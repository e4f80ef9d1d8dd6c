"""The deploy/ nginx configuration, for real: three service processes on loopback ports and
Debian's nginx in front of them, configured from the same template that compose and the
Kubernetes overlay use, with the replicas' PE_MAX_BODY_BYTES (a smaller one than the
default, so that tests can cross it cheaply)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest

from service.cache import Cache
from service.encodings import additive, registry
from service.encodings.sinusoidal import SinusoidalKey
from service.settings import Settings
from service.web.conditional import IMMUTABLE
from tests.support import (
    APPLY,
    NPY,
    ROOT,
    SIMILARITY,
    TABLE,
    WAIT,
    assert_problem,
    free_port,
    load,
    npy_bytes,
    serving,
)

pytestmark = pytest.mark.slow
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TEMPLATE = ROOT / "deploy" / "nginx" / "nginx.conf.template"
# the replicas' PE_MAX_BODY_BYTES, and so nginx's limit, in this module
BODY_LIMIT = 1 << 20


def render(template: str, values: dict[str, str]) -> str:
    """What the nginx image's envsubst step does: fill in ``${NAME}`` for the given names."""
    for name, value in values.items():
        template = template.replace("${" + name + "}", value)
    assert not re.search(r"\$\{\w+\}", template), "a placeholder was left unfilled"
    return template


@dataclass
class Deployment:
    proxy: str
    replicas: list[str]
    processes: list[subprocess.Popen[bytes]]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if not os.path.exists(NGINX):
        pytest.fail("nginx is not installed: .ci/run installs Debian's nginx")
    prefix = tmp_path_factory.mktemp("nginx")
    with ExitStack() as stack:
        limit = {"PE_MAX_BODY_BYTES": str(BODY_LIMIT)}
        served = [stack.enter_context(serving(limit)) for _ in range(3)]
        replicas = [url for url, _ in served]
        port = free_port()
        upstreams = " ".join(
            f"server {url.removeprefix('http://')} max_fails=1 fail_timeout=30s;"
            for url in replicas
        )
        cache = prefix / "cache"
        cache.mkdir()
        site = render(
            TEMPLATE.read_text(),
            {
                "NGINX_PORT": f"127.0.0.1:{port}",
                "NGINX_UPSTREAMS": upstreams,
                "NGINX_CACHE_PATH": str(cache),
                **limit,
            },
        )
        (prefix / "site.conf").write_text(site)
        temp = {name: prefix / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
        for path in temp.values():
            path.mkdir()
        (prefix / "nginx.conf").write_text(
            f"""
{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {prefix}/site.conf;
}}
"""
        )
        check = subprocess.run(
            [NGINX, "-t", "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stderr
        nginx = subprocess.Popen(
            [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf")], stderr=subprocess.DEVNULL
        )
        proxy = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                try:
                    httpx.get(proxy + "/healthz")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            yield Deployment(proxy, replicas, [process for _, process in served])
        finally:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait(timeout=10)


def cache_counters(deployment: Deployment) -> list[dict[str, Any]]:
    """Each replica's GET /v1/cache: its counters, and the tables it holds."""
    return [
        httpx.get(replica + "/v1/cache", timeout=WAIT).json() for replica in deployment.replicas
    ]


def test_tables_come_through_byte_identical(deployment: Deployment) -> None:
    for fmt in ("npy", "raw", "json"):
        url = f"{TABLE}?max_len=300&d_model=48&base=77&format={fmt}"
        direct = httpx.get(
            deployment.replicas[0] + url, headers={"accept-encoding": "identity"}, timeout=WAIT
        )
        proxied = httpx.get(
            deployment.proxy + url, headers={"accept-encoding": "identity"}, timeout=WAIT
        )
        assert proxied.status_code == 200
        assert proxied.content == direct.content
        assert proxied.headers["etag"] == direct.headers["etag"]
        assert proxied.headers["cache-control"] == "public, max-age=31536000, immutable"


def test_a_repeated_table_is_served_from_the_proxy_cache(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}?max_len=64&d_model=64&base=31&format=npy"
    statuses = [httpx.get(url, timeout=WAIT).headers["x-cache-status"] for _ in range(3)]
    assert statuses == ["MISS", "HIT", "HIT"]
    first = cache_counters(deployment)
    httpx.get(url, timeout=WAIT)
    assert cache_counters(deployment) == first


def test_pictures_and_the_explorer_come_through_the_proxy(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}/heatmap.png?max_len=40&d_model=24&base=19"
    responses = [httpx.get(url, timeout=WAIT) for _ in range(2)]
    assert [r.headers["x-cache-status"] for r in responses] == ["MISS", "HIT"]
    assert responses[1].headers["content-type"] == "image/png"
    assert responses[1].content == responses[0].content
    page = httpx.get(deployment.proxy + "/", timeout=WAIT)
    assert page.status_code == 200
    assert "content-security-policy" in page.headers
    assert httpx.get(deployment.proxy + "/explorer/explorer.js", timeout=WAIT).status_code == 200


def test_the_proxy_cache_keeps_formats_apart(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}?max_len=16&d_model=16&base=13"
    as_json = httpx.get(url, headers={"accept": "application/json"}, timeout=WAIT)
    as_npy = httpx.get(url, headers={"accept": "application/x-npy"}, timeout=WAIT)
    again_json = httpx.get(url, headers={"accept": "application/json"}, timeout=WAIT)
    assert as_json.headers["content-type"] == "application/json"
    assert as_npy.headers["content-type"] == "application/x-npy"
    assert again_json.headers["x-cache-status"] == "HIT"
    assert again_json.content == as_json.content


def test_repeated_header_fields_cannot_poison_the_proxy_cache(deployment: Deployment) -> None:
    """A client that repeats Accept or Accept-Encoding (the second field empty) must not
    store its format or coding under the key of clients that send neither."""
    url = deployment.proxy + "/v1/encodings/sinusoidal?max_len=300&d_model=7&base=77.7"
    for poison in (
        [("accept", "application/x-npy"), ("accept", ""), ("accept-encoding", "gzip")],
        [("accept", ""), ("accept", "application/x-npy"), ("accept-encoding", "")],
        [("accept-encoding", ""), ("accept-encoding", "gzip")],
    ):
        httpx.get(url, headers=poison, timeout=WAIT).raise_for_status()
    plain = httpx.get(url, headers={"accept-encoding": "identity"}, timeout=WAIT)
    assert plain.headers["content-type"] == "application/json"
    assert "content-encoding" not in plain.headers
    assert plain.json()["shape"] == [300, 7]


def test_apply_passes_through_uncached(deployment: Deployment) -> None:
    x = np.random.default_rng(1).standard_normal((2, 10, 8)).astype(np.float32)
    body = npy_bytes(x)
    headers = {"content-type": "application/x-npy"}
    expected = additive.apply(x, registry.rows(SinusoidalKey(8), 0, 10), np.sqrt(8.0))
    for _ in range(3):
        response = httpx.post(
            deployment.proxy + TABLE + "/apply", content=body, headers=headers, timeout=WAIT
        )
        assert response.status_code == 200
        assert response.headers.get("x-cache-status") in (None, "", "BYPASS")
        assert np.array_equal(load(response), expected)


def test_requests_are_balanced_across_replicas(deployment: Deployment) -> None:
    before = [counters["misses"] for counters in cache_counters(deployment)]
    for d_model in range(100, 120):
        url = f"{deployment.proxy}{TABLE}?max_len=8&d_model={d_model}&format=npy"
        assert httpx.get(url, timeout=WAIT).status_code == 200
    after = [counters["misses"] for counters in cache_counters(deployment)]
    assert all(a > b for a, b in zip(after, before, strict=True))
    assert sum(after) - sum(before) == 20


def test_the_proxy_refuses_bodies_over_the_replicas_limit(deployment: Deployment) -> None:
    """nginx's limit is the replicas' PE_MAX_BODY_BYTES: a body of exactly that many bytes
    goes through, one more byte gets nginx's own problem, which names the setting."""
    x = np.ones((8191, 32), np.float32)
    body = npy_bytes(x)
    assert len(body) == BODY_LIMIT  # 128 bytes of .npy header and 8191 x 32 float32
    headers = {"content-type": NPY}
    at_limit = httpx.post(deployment.proxy + APPLY, content=body, headers=headers, timeout=WAIT)
    assert at_limit.status_code == 200, at_limit.text
    assert np.array_equal(
        load(at_limit), additive.apply(x, registry.rows(SinusoidalKey(32), 0, 8191), np.sqrt(32))
    )
    over = httpx.post(deployment.proxy + APPLY, content=body + b"\0", headers=headers, timeout=WAIT)
    problem = assert_problem(over, 413, f"proxy limit of {BODY_LIMIT} bytes", "PE_MAX_BODY_BYTES")
    assert problem["limit"] == BODY_LIMIT
    assert problem["setting"] == "PE_MAX_BODY_BYTES"


def test_the_protocol_s_refusals_are_in_its_shape(deployment: Deployment) -> None:
    """Under /v2, nginx's own 413 is the Open Inference Protocol's ``{"error": ...}``, as
    the replicas' refusals are; an infer passes through whole."""
    infer = deployment.proxy + "/v2/models/sinusoidal/infer"
    body = {"inputs": [{"name": "positions", "shape": [2], "datatype": "INT64", "data": [0, 7]}]}
    ok = httpx.post(infer, json={**body, "parameters": {"d_model": 4}}, timeout=WAIT)
    assert ok.status_code == 200, ok.text
    assert ok.json()["outputs"][0]["shape"] == [2, 4]
    over = httpx.post(infer, content=b" " * (BODY_LIMIT + 1), timeout=WAIT)
    assert over.status_code == 413
    assert over.headers["content-type"] == "application/json"
    assert list(over.json()) == ["error"]
    assert "PE_MAX_BODY_BYTES" in over.json()["error"]
    refused = httpx.post(infer, json=body, timeout=WAIT)  # the replica's own
    assert refused.status_code == 400
    assert list(refused.json()) == ["error"]


def test_a_popular_table_is_computed_at_most_once_per_replica(deployment: Deployment) -> None:
    """32 clients at once ask for a table no replica has computed. nginx sends one of them
    on and the others wait for its answer in the cache (proxy_cache_lock), so no replica
    computes the table twice; after that nginx answers alone."""
    key, rows = SinusoidalKey(512, 4242.0), 8192
    url = f"{deployment.proxy}{TABLE}?max_len={rows}&d_model=512&base=4242&format=npy"
    pages = -(-rows // Cache(Settings().cache_bytes).page_rows(key))
    before = cache_counters(deployment)
    start = threading.Barrier(32)

    def fetch(_: int) -> httpx.Response:
        start.wait()
        return httpx.get(url, timeout=WAIT)

    with ThreadPoolExecutor(32) as pool:
        burst = list(pool.map(fetch, range(32)))
    assert [response.status_code for response in burst] == [200] * 32
    assert all(response.content == burst[0].content for response in burst)
    assert np.array_equal(load(burst[0]), registry.rows(key, 0, rows))
    after = cache_counters(deployment)
    computed = [a["misses"] - b["misses"] for a, b in zip(after, before, strict=True)]
    statuses = sorted(response.headers["x-cache-status"] for response in burst)
    print(f"\n32 clients at once: {statuses}; pages computed per replica {computed}")
    assert all(misses in (0, pages) for misses in computed), (computed, pages)
    assert sum(computed) == pages  # one request of the 32 reached a replica
    assert [a["uncached"] - b["uncached"] for a, b in zip(after, before, strict=True)] == [0] * 3

    later = [httpx.get(url, timeout=WAIT) for _ in range(10)]
    assert [response.headers["x-cache-status"] for response in later] == ["HIT"] * 10
    assert all(response.content == burst[0].content for response in later)
    assert cache_counters(deployment) == after  # no replica saw those requests


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/v1/encodings/rotary?max_len=64&head_dim=32&base=5000", id="rotary"),
        pytest.param("/v1/encodings/rotary?max_len=8&head_dim=8&format=npz", id="rotary-npz"),
        pytest.param("/v1/biases/alibi/slopes?num_heads=12", id="alibi-slopes"),
        pytest.param("/v1/biases/alibi?num_heads=4&max_len=32&format=npy", id="alibi-bias"),
        pytest.param(f"{SIMILARITY}?max_len=32&d_model=16&base=23", id="similarity-picture"),
        pytest.param("/v1/encodings/temperature?max_len=9000&start=8190", id="temperature"),
        pytest.param("/v1/audit/rotary?max_len=4096&head_dim=64", id="audit"),
    ],
)
def test_every_immutable_answer_is_cached(deployment: Deployment, path: str) -> None:
    responses = [httpx.get(deployment.proxy + path, timeout=WAIT) for _ in range(2)]
    assert [response.status_code for response in responses] == [200, 200]
    assert responses[0].headers["cache-control"] == IMMUTABLE
    assert [response.headers["x-cache-status"] for response in responses] == ["MISS", "HIT"]
    assert responses[1].content == responses[0].content


def test_answers_that_are_not_immutable_pass_through(deployment: Deployment) -> None:
    for path in ("/v1/presets", "/v1/cache", "/healthz", "/openapi.json"):
        response = httpx.get(deployment.proxy + path, timeout=WAIT)
        assert response.status_code == 200
        assert "immutable" not in response.headers.get("cache-control", "")
        assert "x-cache-status" not in response.headers
    queries = npy_bytes(np.ones((1, 2, 4, 8), np.float32))
    config = {"rope_theta": 500.0, "head_dim": 8, "max_position_embeddings": 8}
    for response in [
        httpx.post(
            deployment.proxy + "/v1/encodings/rotary/apply",
            content=queries,
            headers={"content-type": NPY},
            timeout=WAIT,
        ),
        httpx.post(
            deployment.proxy + "/v1/encodings/rotary/from-config", json=config, timeout=WAIT
        ),
    ] * 2:
        assert response.status_code == 200, response.text
        assert "x-cache-status" not in response.headers


def test_stopping_a_replica_during_load_loses_no_request(deployment: Deployment) -> None:
    """A replica is stopped (SIGTERM, as `docker stop` does) while 8 clients keep sending
    tables (cached and cold) and applies through nginx: its in-flight answers finish and
    nginx sends the rest to the other replicas."""
    results = load_while(deployment, deployment.processes[0].terminate, base=1001.0)
    print(
        f"\nstopped during load: {len(results)} requests, {sum(not ok for _, ok in results)} failed"
    )
    assert results == [(200, True)] * (8 * 40)


def test_with_a_replica_killed_every_request_succeeds(deployment: Deployment) -> None:
    """Then another replica dies at once (SIGKILL): nginx marks it down on the first refused
    connection and every request goes to the one left."""
    deployment.processes[1].kill()
    deployment.processes[1].wait()
    results = load_while(deployment, lambda: None, base=1002.0)
    print(f"\nafter a kill: {len(results)} requests, {sum(not ok for _, ok in results)} failed")
    assert results == [(200, True)] * (8 * 40)


def load_while(
    deployment: Deployment, event: Callable[[], None], base: float
) -> list[tuple[int | str, bool]]:
    """8 clients x 40 requests through the proxy (cold tables of ``base``), ``event``
    happening 0.5 s in."""
    x = np.ones((4, 8), np.float32)
    apply_body = npy_bytes(x)
    expected = additive.apply(x, registry.rows(SinusoidalKey(8), 0, 4), np.sqrt(8.0))
    results: list[tuple[int | str, bool]] = []

    def client(worker: int) -> None:
        with httpx.Client(base_url=deployment.proxy, timeout=WAIT) as http:
            for i in range(40):
                try:
                    results.append(one(http, worker, i))
                except httpx.HTTPError as exc:
                    results.append((repr(exc), False))

    def one(http: httpx.Client, worker: int, i: int) -> tuple[int | str, bool]:
        if i % 3 == 0:
            response = http.post(
                TABLE + "/apply",
                content=apply_body,
                headers={"content-type": "application/x-npy"},
            )
            ok = response.status_code == 200 and np.array_equal(load(response), expected)
        elif i % 3 == 1:
            d_model = 300 + worker * 100 + i
            response = http.get(f"{TABLE}?max_len=2000&d_model={d_model}&format=npy")
            ok = response.status_code == 200 and np.array_equal(
                load(response), registry.rows(SinusoidalKey(d_model), 0, 2000)
            )
        else:
            response = http.get(f"{TABLE}?max_len=64&d_model=64&base=31&format=npy")
            ok = response.status_code == 200
        return response.status_code, ok

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    event()
    for thread in threads:
        thread.join(120)
    return sorted(results, key=lambda result: not result[1])

"""The deploy/ nginx configuration, for real: two service processes on loopback ports and
Debian's nginx in front of them, configured from the same template that compose uses."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
import numpy as np
import pytest

from service.encodings import additive, registry
from service.encodings.sinusoidal import SinusoidalKey
from tests.support import ROOT, TABLE, free_port, load, npy_bytes, serving

pytestmark = pytest.mark.slow
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


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
        served = [stack.enter_context(serving()) for _ in range(3)]
        replicas = [url for url, _ in served]
        port = free_port()
        upstreams = " ".join(
            f"server {url.removeprefix('http://')} max_fails=1 fail_timeout=30s;"
            for url in replicas
        )
        cache = prefix / "cache"
        cache.mkdir()
        site = render(
            (ROOT / "deploy" / "nginx.conf.template").read_text(),
            {
                "NGINX_PORT": f"127.0.0.1:{port}",
                "NGINX_UPSTREAMS": upstreams,
                "NGINX_CACHE_PATH": str(cache),
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


def test_tables_come_through_byte_identical(deployment: Deployment) -> None:
    for fmt in ("npy", "raw", "json"):
        url = f"{TABLE}?max_len=300&d_model=48&base=77&format={fmt}"
        direct = httpx.get(deployment.replicas[0] + url, headers={"accept-encoding": "identity"})
        proxied = httpx.get(deployment.proxy + url, headers={"accept-encoding": "identity"})
        assert proxied.status_code == 200
        assert proxied.content == direct.content
        assert proxied.headers["etag"] == direct.headers["etag"]
        assert proxied.headers["cache-control"] == "public, max-age=31536000, immutable"


def test_a_repeated_table_is_served_from_the_proxy_cache(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}?max_len=64&d_model=64&base=31&format=npy"
    statuses = [httpx.get(url).headers["x-cache-status"] for _ in range(3)]
    assert statuses == ["MISS", "HIT", "HIT"]
    first = [httpx.get(replica + "/v1/cache").json()["misses"] for replica in deployment.replicas]
    httpx.get(url)
    assert [
        httpx.get(replica + "/v1/cache").json()["misses"] for replica in deployment.replicas
    ] == first


def test_pictures_and_the_explorer_come_through_the_proxy(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}/heatmap.png?max_len=40&d_model=24&base=19"
    responses = [httpx.get(url) for _ in range(2)]
    assert [r.headers["x-cache-status"] for r in responses] == ["MISS", "HIT"]
    assert responses[1].headers["content-type"] == "image/png"
    assert responses[1].content == responses[0].content
    page = httpx.get(deployment.proxy + "/")
    assert page.status_code == 200
    assert "content-security-policy" in page.headers
    assert httpx.get(deployment.proxy + "/explorer/explorer.js").status_code == 200


def test_the_proxy_cache_keeps_formats_apart(deployment: Deployment) -> None:
    url = deployment.proxy + f"{TABLE}?max_len=16&d_model=16&base=13"
    as_json = httpx.get(url, headers={"accept": "application/json"})
    as_npy = httpx.get(url, headers={"accept": "application/x-npy"})
    again_json = httpx.get(url, headers={"accept": "application/json"})
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
        httpx.get(url, headers=poison).raise_for_status()
    plain = httpx.get(url, headers={"accept-encoding": "identity"})
    assert plain.headers["content-type"] == "application/json"
    assert "content-encoding" not in plain.headers
    assert plain.json()["shape"] == [300, 7]


def test_apply_passes_through_uncached(deployment: Deployment) -> None:
    x = np.random.default_rng(1).standard_normal((2, 10, 8)).astype(np.float32)
    body = npy_bytes(x)
    headers = {"content-type": "application/x-npy"}
    expected = additive.apply(x, registry.rows(SinusoidalKey(8), 0, 10), np.sqrt(8.0))
    for _ in range(3):
        response = httpx.post(deployment.proxy + TABLE + "/apply", content=body, headers=headers)
        assert response.status_code == 200
        assert response.headers.get("x-cache-status") in (None, "", "BYPASS")
        assert np.array_equal(load(response), expected)


def test_requests_are_balanced_across_replicas(deployment: Deployment) -> None:
    before = [httpx.get(r + "/v1/cache").json()["misses"] for r in deployment.replicas]
    for d_model in range(100, 120):
        assert (
            httpx.get(
                deployment.proxy + f"{TABLE}?max_len=8&d_model={d_model}&format=npy"
            ).status_code
            == 200
        )
    after = [httpx.get(r + "/v1/cache").json()["misses"] for r in deployment.replicas]
    assert all(a > b for a, b in zip(after, before, strict=True))
    assert sum(after) - sum(before) == 20


def test_the_proxy_answers_its_own_refusals_as_problems(deployment: Deployment) -> None:
    big = b"\0" * (65 << 20)
    response = httpx.post(
        deployment.proxy + TABLE + "/apply",
        content=big,
        headers={"content-type": "application/x-npy"},
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 413


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
        with httpx.Client(base_url=deployment.proxy, timeout=30) as http:
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

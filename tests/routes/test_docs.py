"""/docs and /redoc offline: Swagger UI and ReDoc with their assets served from this
origin (the fastapi-offline package's files), under a Content-Security-Policy of 'self'."""

from __future__ import annotations

import gzip
import re
from importlib import resources
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from tests.support import assert_problem

PAGES = ["/docs", "/redoc"]
TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def policy(response: httpx.Response) -> dict[str, list[str]]:
    """The page's Content-Security-Policy, by directive."""
    directives = response.headers["content-security-policy"].split(";")
    return {name: values for name, *values in (d.split() for d in directives if d.strip())}


def references(page: str) -> list[str]:
    """Every address the page refers to: src, href, spec-url."""
    return re.findall(r'(?:src|href|spec-url)="([^"]*)"', page)


@pytest.mark.parametrize("path", PAGES)
def test_the_page_refers_to_this_origin_only(api: httpx.Client, path: str) -> None:
    page = api.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert not re.search(r"(?i)(https?:)?//", page.text)  # no other host, not even a link
    links = references(page.text)
    assert links
    for link in links:
        resolved = urlsplit(urljoin(f"http://testserver{path}", link))
        assert resolved.netloc == "testserver", link
    # no inline script: every script has a src
    assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", page.text) == []
    assert api.get(path, headers={"if-none-match": page.headers["etag"]}).status_code == 304
    assert page.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize("path", PAGES)
def test_the_pages_assets_are_served_and_cacheable(api: httpx.Client, path: str) -> None:
    page = api.get(path)
    assets = [urljoin(path, link) for link in references(page.text) if link.startswith("docs/")]
    assert len(assets) >= 2
    for url in assets:
        asset = api.get(url, headers={"accept-encoding": "identity"})
        assert asset.status_code == 200, url
        kind = TYPES[url[url.rindex(".") :]]
        assert asset.headers["content-type"].startswith(kind), url
        control = asset.headers["cache-control"]
        assert "public" in control
        assert int(re.search(r"max-age=(\d+)", control)[1]) >= 3600  # type: ignore[index]
        tag = asset.headers["etag"]
        again = api.get(url, headers={"accept-encoding": "identity", "if-none-match": tag})
        assert again.status_code == 304, url


@pytest.mark.parametrize(
    "name", ["swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"]
)
def test_the_assets_are_the_packages_files(api: httpx.Client, name: str) -> None:
    """Served from fastapi-offline's installed files, not copies in this repository."""
    files = resources.files("fastapi_offline") / "static" / name
    served = api.get(f"/docs/assets/{name}", headers={"accept-encoding": "identity"})
    assert served.content == files.read_bytes()
    assert "content-encoding" not in served.headers


def test_scripts_are_gzipped_for_clients_that_take_it(api: httpx.Client) -> None:
    url = "/docs/assets/swagger-ui-bundle.js"
    plain = api.get(url, headers={"accept-encoding": "identity"})
    with api.stream("GET", url, headers={"accept-encoding": "gzip"}) as packed:
        body = b"".join(packed.iter_raw())
    assert packed.headers["content-encoding"] == "gzip"
    assert int(packed.headers["content-length"]) == len(body) < len(plain.content) // 2
    assert gzip.decompress(body) == plain.content
    assert packed.headers["etag"] != plain.headers["etag"]  # one tag per encoding
    assert packed.headers["vary"] == plain.headers["vary"] == "Accept-Encoding"


def test_the_policies_allow_this_origin_only(api: httpx.Client) -> None:
    docs, redoc = (policy(api.get(path)) for path in PAGES)
    for directives in (docs, redoc):
        assert directives["default-src"] == ["'none'"]
        assert directives["script-src"] == ["'self'"]  # no inline script, no other host
        assert directives["connect-src"] == ["'self'"]
        assert directives["frame-ancestors"] == ["'none'"]
        values = [v for vs in directives.values() for v in vs]
        assert not [
            v for v in values if "//" in v or v == "*" or v.startswith(("http", "'unsafe-e"))
        ]
    assert not [v for vs in docs.values() for v in vs if v.startswith("'unsafe")]
    # ReDoc writes its <style> elements at run time and searches in a worker of its own
    assert redoc["style-src"] == ["'self'", "'unsafe-inline'"]
    assert redoc["worker-src"] == ["blob:"]


def test_swagger_ui_starts_from_its_own_script(api: httpx.Client) -> None:
    init = api.get("/docs/assets/swagger-init.js")
    assert init.headers["content-type"].startswith("text/javascript")
    assert '"openapi.json"' in init.text
    assert "validatorUrl: null" in init.text  # no badge from validator.swagger.io
    assert 'dom_id: "#swagger-ui"' in init.text
    page = api.get("/docs").text
    assert page.index("swagger-ui-bundle.js") < page.index("swagger-init.js")
    assert 'id="swagger-ui"' in page
    redoc = api.get("/redoc").text
    assert '<redoc spec-url="openapi.json">' in redoc


@pytest.mark.parametrize(
    "path",
    [
        "/docs/assets/nope.js",
        "/docs/assets/..%2Fcore.py",
        "/docs/assets/static",
        "/docs/oauth2-redirect",
    ],
)
def test_only_the_assets_are_served(api: httpx.Client, path: str) -> None:
    assert_problem(api.get(path), 404)


def test_the_pages_name_the_service(api: httpx.Client) -> None:
    assert "<title>Positional encodings - Swagger UI</title>" in api.get("/docs").text
    assert "<title>Positional encodings - ReDoc</title>" in api.get("/redoc").text

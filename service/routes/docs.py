"""The API, browsable: Swagger UI at ``/docs`` and ReDoc at ``/redoc``, with their scripts
and style sheets served from here (the ``fastapi-offline`` package's copies), so that they
work without the internet and fetch nothing from another host.

Each page says so in its Content-Security-Policy: everything from this origin only, no
inline script (Swagger UI's start-up is a script file of its own, where FastAPI's page has
it inline). ReDoc styles itself with ``<style>`` elements that it writes at run time, which
only ``'unsafe-inline'`` styles allow, and searches in a worker made from a ``blob:``: its
page alone allows these (styles and its own worker, never another script or host; the
Redocly logo it would load from a CDN is refused, and ReDoc then leaves it out). The pages
are revalidated (``no-cache``, a strong ``ETag``); the assets, which change only with the
package, are kept a day, gzipped for clients that take it.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import html
from importlib import resources
from typing import Final, NamedTuple

from fastapi import APIRouter, HTTPException, Request, Response

from service.web.answers import not_modified
from service.web.conditional import strong_etag
from service.web.negotiation import accepts_gzip, combined

ASSETS: Final = "/docs/assets/"
_PACKAGE: Final = "fastapi_offline"
# the package's files, by name, and their media types
_STATIC: Final = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
# Swagger UI's start-up, as FastAPI's page has it inline; no validator badge (another host)
_SWAGGER_INIT: Final = b"""\
"use strict";
window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""
_REDOC_CSS: Final = b"body { margin: 0; padding: 0; }\n"
_OWN: Final = {
    "swagger-init.js": (_SWAGGER_INIT, "text/javascript; charset=utf-8"),
    "redoc.css": (_REDOC_CSS, "text/css; charset=utf-8"),
}
# Only this origin. Swagger UI needs nothing else; ReDoc writes <style> elements at run time
# (styles, never scripts) and runs its search in a worker it makes from a blob: URL.
DOCS_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
REDOC_POLICY: Final = DOCS_POLICY.replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'; worker-src blob:"
)
_ASSET_CACHE: Final = "public, max-age=86400"
# Addresses are relative (``docs/assets/...`` from ``/docs`` and ``/redoc``): they hold
# behind a proxy that serves the service under a path prefix too.
_SWAGGER_PAGE: Final = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - Swagger UI</title>
<link rel="stylesheet" href="docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/assets/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/assets/swagger-init.js"></script>
</body>
</html>
"""
_REDOC_PAGE: Final = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - ReDoc</title>
<link rel="stylesheet" href="docs/assets/redoc.css">
<link rel="icon" type="image/png" href="docs/assets/favicon.png">
</head>
<body>
<noscript>ReDoc needs JavaScript: the API is also at <a href="docs">docs</a>.</noscript>
<redoc spec-url="openapi.json"></redoc>
<script src="docs/assets/redoc.standalone.js"></script>
</body>
</html>
"""

router = APIRouter()


class Asset(NamedTuple):
    """A file as served: its bytes and tag, and gzipped (None where that does not pay)."""

    body: bytes
    etag: str
    media_type: str
    gzipped: bytes | None
    gzipped_etag: str


def _asset_of(body: bytes, media_type: str) -> Asset:
    packed = gzip.compress(body, mtime=0) if media_type.startswith("text/") else None
    if packed is not None and len(packed) >= len(body):
        packed = None
    return Asset(body, strong_etag(body), media_type, packed, strong_etag(packed or b""))


_LOADED: dict[str, Asset] = {}


def _load(name: str) -> Asset:
    if name in _OWN:
        body, media_type = _OWN[name]
        found = _asset_of(body, media_type)
    else:
        body = (resources.files(_PACKAGE) / "static" / name).read_bytes()
        found = _asset_of(body, _STATIC[name])
    _LOADED[name] = found
    return found


@functools.cache
def _page(template: str, title: str) -> tuple[bytes, str]:
    body = template.format(title=html.escape(title)).encode()
    return body, strong_etag(body)


def _page_response(request: Request, template: str, policy: str) -> Response:
    body, etag = _page(template, str(request.app.title))
    headers = {"etag": etag, "cache-control": "no-cache", "content-security-policy": policy}
    unchanged = not_modified(request, headers)
    if unchanged is not None:
        return unchanged
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> Response:
    """Swagger UI: the API, browsable, with requests made from the page."""
    return _page_response(request, _SWAGGER_PAGE, DOCS_POLICY)


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> Response:
    """ReDoc: the API as one document."""
    return _page_response(request, _REDOC_PAGE, REDOC_POLICY)


@router.get(ASSETS + "{name}", include_in_schema=False)
async def asset(name: str, request: Request) -> Response:
    """The pages' scripts, style sheets and icon."""
    if name not in _STATIC and name not in _OWN:
        raise HTTPException(404)
    # the first read of a megabyte script, and its gzipping, off the event loop
    found = _LOADED.get(name)
    if found is None:
        found = await asyncio.to_thread(_load, name)
    headers = {"cache-control": _ASSET_CACHE}
    body = found.body
    if found.gzipped is None:
        headers["etag"] = found.etag
    else:
        headers["vary"] = "Accept-Encoding"
        if accepts_gzip(combined(request.scope["headers"], b"accept-encoding")):
            body = found.gzipped
            headers |= {"etag": found.gzipped_etag, "content-encoding": "gzip"}
        else:
            headers["etag"] = found.etag
    unchanged = not_modified(request, headers)
    if unchanged is not None:
        return unchanged
    return Response(body, media_type=found.media_type, headers=headers)

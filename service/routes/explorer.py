"""The explorer: a static page (HTML, CSS, a script per view: sinusoidal, RoPE, ALiBi,
diffusion timesteps, sin-cos grids, multi-axis RoPE, vision towers' RoPE with a Qwen-VL
layout's ids and tower rows; one for the audit and compare views; one
that checks a .npy file of the user's) that draws tables in the browser from the raw
endpoints, and audits, comparisons and checks from their JSON answers. Nothing is fetched
from another host. The page carries the service's ``PE_MAX_ELEMENTS``, so that the curl
commands it offers are ones the service answers."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

from fastapi import APIRouter, HTTPException, Request, Response

from service.web.answers import not_modified
from service.web.conditional import strong_etag
from service.web.deps import RuntimeDep

FILES: Final = Path(__file__).parent / "explorer_files"
_ASSETS: Final = {
    "explorer.js": "text/javascript; charset=utf-8",
    "rope.js": "text/javascript; charset=utf-8",
    "alibi.js": "text/javascript; charset=utf-8",
    "timestep.js": "text/javascript; charset=utf-8",
    "sincos.js": "text/javascript; charset=utf-8",
    "ropend.js": "text/javascript; charset=utf-8",
    "vision.js": "text/javascript; charset=utf-8",
    "check.js": "text/javascript; charset=utf-8",
    "audit.js": "text/javascript; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
}
# The page may talk to its own origin only: nothing is fetched from another host.
_PAGE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# where the page is told the limit on an answer's elements
_LIMIT_SLOT: Final = b'<meta name="pe-max-elements" content="">'

router = APIRouter()


@functools.cache
def _asset(name: str, max_elements: int | None = None) -> tuple[bytes, str]:
    body = (FILES / name).read_bytes()
    if max_elements is not None:
        body = body.replace(_LIMIT_SLOT, _LIMIT_SLOT.replace(b'""', b'"%d"' % max_elements))
    return body, strong_etag(body)


def _static(
    request: Request, name: str, media_type: str, max_elements: int | None = None, **headers: str
) -> Response:
    body, etag = _asset(name, max_elements)
    headers = {"etag": etag, "cache-control": "no-cache", **headers}
    unchanged = not_modified(request, headers)
    if unchanged is not None:
        return unchanged
    return Response(body, media_type=media_type, headers=headers)


@router.get("/", include_in_schema=False)
async def explorer(request: Request, runtime: RuntimeDep) -> Response:
    """The explorer page, with this service's ``PE_MAX_ELEMENTS``."""
    return _static(
        request,
        "index.html",
        "text/html; charset=utf-8",
        runtime.limits.elements.value,
        **{"content-security-policy": _PAGE_POLICY},
    )


@router.get("/explorer/{name}", include_in_schema=False)
async def explorer_asset(name: str, request: Request) -> Response:
    """The explorer's scripts and style sheet."""
    if name not in _ASSETS:
        raise HTTPException(404)
    return _static(request, name, _ASSETS[name])

"""RFC 9457 problem responses for every error family: the service's own, the framework's
validation errors, HTTP errors such as 404 and 405, and anything unexpected."""

from __future__ import annotations

import difflib
import json
import logging
import re
from http import HTTPStatus
from typing import Any, Final

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from service.errors import PROBLEM_BASE, InvalidParameter, NotAcceptable, ServiceError
from service.text import shown

PROBLEM_MEDIA_TYPE = "application/problem+json"
# where each kind of value travels in this HTTP API
_LOCATIONS = {"parameter": "query", "input": "body"}
logger = logging.getLogger("service")


def problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    type: str = "about:blank",
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> Response:
    """An ``application/problem+json`` response."""
    body = {
        "type": type,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **extensions,
    }
    try:
        content = orjson.dumps(body)
    except TypeError:  # integers past 64 bits, which orjson refuses and JSON allows
        content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(content, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


# the refused parameters of a request that get a "did you mean"
_HINTED: Final = 4
# The Open Inference Protocol's routes answer errors in its own shape
_PROTOCOL: Final = "/v2"


def _answer(request: Request, status: int, detail: str, **fields: Any) -> Response:
    """:func:`problem`; on the Open Inference Protocol's routes, its ``{"error": detail}``
    instead, where a refusal of the request's content is a 400, as the protocol has it
    (422 elsewhere), with the same headers."""
    path = request.url.path
    if path != _PROTOCOL and not path.startswith(_PROTOCOL + "/"):
        return problem(status, detail, **fields)
    return Response(
        orjson.dumps({"error": detail or fields.get("title") or HTTPStatus(status).phrase}),
        status_code=400 if status == 422 else status,
        headers=fields.get("headers"),
        media_type="application/json",
    )


async def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    extensions = exc.extensions
    if isinstance(exc, InvalidParameter):
        where = _LOCATIONS[exc.source]
        items = [
            {"name": e["name"], "in": where, "detail": e["detail"]}
            for e in exc.extensions["errors"]
        ]
        extensions = {**extensions, "errors": items}
    if isinstance(exc, NotAcceptable):  # negotiated from Accept: another Accept may get a 200
        extensions = {**extensions, "headers": {"vary": "Accept"}}
    return _answer(request, exc.status, exc.detail, title=exc.title, type=exc.type, **extensions)


def _parameters(request: Request) -> list[str]:
    """The query parameters the route that refused ``request`` takes."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    names: list[str] = []
    for parameter in getattr(dependant, "query_params", ()):
        model = parameter.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names += [field.alias or name for name, field in model.model_fields.items()]
            names += list(getattr(model, "ALIASES", {}))
        else:
            names.append(parameter.alias)
    return names


def _closest(word: str, choices: list[str]) -> str:
    """``; did you mean X?`` for the choice closest to ``word``, if one is close."""
    lowered = {choice.lower(): choice for choice in choices}
    found = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[found[0]]}?" if found else ""


def _validation_item(error: Any, parameters: list[str], hint: bool) -> dict[str, str]:
    location, *path = [str(part) for part in error["loc"]] or ["request"]
    name = ".".join(path) or location
    detail = error["msg"]
    given = error.get("input")
    if error["type"] == "extra_forbidden" and location == "query":
        detail = "is not a parameter of this endpoint"
        detail += _closest(path[-1], parameters) if hint else ""
    elif hint and error["type"] in ("literal_error", "enum") and isinstance(given, str):
        choices = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        detail += _closest(shown(given), choices)
    return {"name": name, "in": location, "detail": detail}


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    parameters = _parameters(request)
    errors = exc.errors()
    # hints for the first few: a query of a thousand misspellings costs a thousand lookups
    items = [_validation_item(e, parameters, i < _HINTED) for i, e in enumerate(errors)]
    detail = "; ".join(f"{item['name']}: {item['detail']}" for item in items)
    return _answer(
        request,
        InvalidParameter.status,
        detail,
        title=InvalidParameter.title,
        type=PROBLEM_BASE + InvalidParameter.slug,
        errors=items,
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    detail = exc.detail if exc.detail != HTTPStatus(status).phrase else ""
    if status == 404 and not detail:
        detail = f"no resource at {request.url.path}; see /docs for the API"
    elif status == 405:
        allowed = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow", "")
        detail = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed}"
    headers = dict(exc.headers) if exc.headers else None
    return _answer(request, status, detail or HTTPStatus(status).description, headers=headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return _answer(request, 500, "the service failed to answer this request; it has been logged")


def install(app: FastAPI) -> None:
    """Route every error family through :func:`problem`."""
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)

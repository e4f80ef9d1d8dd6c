"""A query built from a posted document (a model's ``config.json``) and the request's own
parameters, for any route that takes one: the document read within ``PE_MAX_CONFIG_BYTES``
and the posted-bytes budget, parsed and read off the event loop (a config may name thousands
of layers), and every refusal located where its value came from (the body, or the query that
overrode it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from service.errors import InvalidInput, InvalidParameter, MalformedBody
from service.limits import reserving
from service.runtime import Runtime
from service.schemas.common import Read
from service.web.bodies import body_format, read_posted
from service.web.declared import FromDocument
from service.web.negotiation import combined

T = TypeVar("T")


async def posted_document(
    request: Request, runtime: Runtime, read: Callable[[bytes | bytearray], T]
) -> T:
    """The JSON document posted with ``request`` (415 for any other media type: a document,
    never a batch), as ``read`` parses and checks it in a worker thread."""
    content_type = combined(request.scope["headers"], b"content-type")
    body_format(content_type, ("json",))
    with reserving(runtime.posted) as reservation:  # a config.json: a few KiB, while parsed
        body = await read_posted(request, runtime, runtime.limits.config_bytes, reservation)
        if not body.strip():
            raise MalformedBody("the body is empty: send the JSON document (a config.json)")
        return await runtime.compute(len(body), read, body)


def fields(spec: FromDocument, document: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """What ``spec`` reads from a parsed ``document`` with the request's parameters
    (``asked``): one table or several. CPU work on a config's every layer: a worker's."""
    got = spec.fields(document, asked)
    return got if isinstance(got, Read) else Read({"": got})


async def posted_read(
    request: Request, runtime: Runtime, spec: FromDocument, asked: Mapping[str, Any]
) -> Read:
    """The document posted with ``request``, parsed and read (:func:`fields`) in one worker
    thread, in the lane its size takes: neither runs on the event loop."""
    return await posted_document(
        request, runtime, lambda body: fields(spec, spec.read(body), asked)
    )


async def read_fields(
    runtime: Runtime,
    spec: FromDocument,
    document: dict[str, Any],
    asked: Mapping[str, Any],
    size: int = 0,
) -> Read:
    """:func:`fields` of a document already parsed (a comparison's config) in a worker
    thread, in the lane ``size`` (its bytes, where known) takes."""
    return await runtime.compute(size, fields, spec, document, asked)


@contextmanager
def located(asked: Mapping[str, Any]) -> Iterator[None]:
    """Refusals of a query built from a document's fields and the request's (``asked``):
    a field the request gave is the query's, any other the body's."""
    try:
        yield
    except ValidationError as exc:
        errors: list[Any] = [
            {**e, "loc": ("query" if e["loc"][0] in asked else "body", *e["loc"])}
            for e in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None
    except InvalidParameter as exc:
        if isinstance(exc, InvalidInput) or exc.name in asked:
            raise
        raise InvalidInput(exc.name, exc.extensions["errors"][0]["detail"]) from None


@contextmanager
def in_table(name: str, parameters: Mapping[str, Any], configured: bool) -> Iterator[None]:
    """Refusals of the table ``name`` of a body that holds tables (a comparison's ``a``),
    located in it: a field its ``parameters`` gave is ``name.parameters.FIELD``; any other,
    read from its config (where ``configured``), ``name.config.FIELD``, as the config's
    reader names it."""

    def where(field: Any) -> tuple[str, str]:
        inside = "parameters" if field in parameters or not configured else "config"
        return name, inside

    try:
        yield
    except ValidationError as exc:
        errors = [
            {**e, "loc": ("body", *where(e["loc"][0] if e["loc"] else None), *e["loc"])}
            for e in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None
    except InvalidParameter as exc:
        items = exc.extensions["errors"]
        # the config reader's own refusals name a field of the config
        reader = isinstance(exc, InvalidInput) and configured
        names = [
            ".".join((name, "config") if reader else where(each["name"])) + "." + each["name"]
            for each in items
        ]
        raise InvalidInput(names[0], items[0]["detail"], tuple(names[1:])) from None

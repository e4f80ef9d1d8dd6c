"""A query built from a posted document (a model's ``config.json``) and the request's own
parameters, for any route that takes one: the document read within ``PE_MAX_CONFIG_BYTES``
and the posted-bytes budget, parsed off the event loop, and every refusal located where its
value came from (the body, or the query that overrode it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from service.errors import InvalidInput, InvalidParameter, MalformedBody
from service.limits import reserving
from service.runtime import Runtime
from service.web.bodies import body_format, read_posted
from service.web.negotiation import combined


async def posted_document(
    request: Request, runtime: Runtime, read: Callable[[bytes | bytearray], dict[str, Any]]
) -> dict[str, Any]:
    """The JSON document posted with ``request`` (415 for any other media type: a document,
    never a batch), as ``read`` parses and checks it in a worker thread."""
    content_type = combined(request.scope["headers"], b"content-type")
    body_format(content_type, ("json",))
    with reserving(runtime.posted) as reservation:  # a config.json: a few KiB, while parsed
        body = await read_posted(request, runtime, runtime.limits.config_bytes, reservation)
        if not body.strip():
            raise MalformedBody("the body is empty: send the JSON document (a config.json)")
        return await runtime.compute(len(body), read, body)


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

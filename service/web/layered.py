"""The answer of a document that makes several tables (a model whose rope parameters are
per layer type: Gemma 3, Gemma 4): every table, each named by its kind of layer, with which
layer is which kind. JSON ``{"layer_types": [...], "config_fields": [...], "tables":
{NAME: {the table's fields, its arrays, "location": its GET}}}``; ``npz`` and safetensors
members ``NAME/cos``, ``NAME/sin`` (a row's named arrays; ``NAME/data`` for one), the
safetensors' ``__metadata__`` holding ``layer_types`` and each table's fields. ``npy`` and
``raw`` hold one array: a request names one kind (``layer_type``) for them. The tables are
checked and planned here, encoded by :func:`service.handlers.tables`."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

from fastapi import Request, Response

from service import codecs, handlers
from service.codecs.types import Encoded, Format
from service.encodings import registry
from service.errors import InvalidParameter
from service.runtime import Runtime
from service.schemas.common import Read
from service.web.answers import Offer, Plan, answer
from service.web.declared import Declared, FromDocument
from service.web.documents import located

OFFERED: Final[tuple[Format, ...]] = ("json", "npz", "safetensors")
# what a JSON answer over the limit suggests: the formats of several tables that are not text
_BINARY: Final = "format=" + " or ".join(f for f in OFFERED if not codecs.textual(f))
# a header that would be longer is left out (the JSON answer holds the same)
MAX_HEADER: Final = 8192


def listed(names: list[str] | tuple[str, ...]) -> str | None:
    """``names`` as a header's comma-separated list, each quoted where it must be (``=``
    kept: a field a config left out is named with the default taken, ``head_dim=256``);
    None when that would pass ``MAX_HEADER``."""
    parts, size = [], -2
    for name in names:  # stops where the header would pass it: a config may name 65,536 layers
        part = urllib.parse.quote(name, safe="._-/[]=")
        size += len(part) + 2
        if size > MAX_HEADER:
            return None
        parts.append(part)
    return ", ".join(parts)


def said(read: Read) -> dict[str, str]:
    """The headers that say what a document's answer read: its fields, its layers' kinds."""
    headers = {}
    for header, names in (("x-config-fields", read.fields), ("x-layer-types", read.layers)):
        text = listed(names) if names else None
        if text is not None:
            headers[header] = text
    return headers


async def response(
    request: Request,
    runtime: Runtime,
    declared: Declared[Any, Any],
    spec: FromDocument,
    read: Read,
    asked: Mapping[str, Any],
) -> Response:
    """Every table ``read`` names, the request's parameters (``asked``) over each's."""
    fmt = asked.get("format")
    if fmt is not None and fmt not in OFFERED:
        raise InvalidParameter(
            "format",
            f"{fmt} holds one table; the config makes one per layer type "
            f"({', '.join(read.tables)}): give layer_type, or ask for json, npz or safetensors",
        )
    offer = Offer(OFFERED, fmt)
    chosen = offer.chosen(request)
    blocks, described = {}, {}
    for name in read.tables:
        given = spec.parameters(read, asked, name)
        with located(asked):
            query = declared.query.model_validate(given)
            key = await declared.key_of(runtime, query)
        block = declared.block(query, key)
        if codecs.textual(chosen):  # before check_table's hint, for the formats it takes
            runtime.limits.json_answer(block.elements, hint=f"ask for {_BINARY}, or fewer rows")
        handlers.check_table(runtime.limits, block, chosen, declared.width_name)
        location = f"{declared.resource}?{urllib.parse.urlencode(given)}"
        blocks[name] = block
        described[name] = {**declared.describe(query, key), "location": location}
    elements = sum(block.elements for block in blocks.values())
    runtime.limits.rows(elements, 1, "the numbers of every layer type's table")

    async def encode(fmt: Format, gzip: bool) -> Encoded:
        layers, fields = read.layers, list(read.fields)
        return await handlers.tables(runtime, blocks, described, layers, fields, fmt, gzip)

    plan = Plan(
        offer,
        encode,
        elements=elements,
        json_hint=f"ask for {_BINARY}, or give layer_type",
        large=sum(block.nbytes for block in blocks.values()) > handlers.LARGE_ANSWER_BYTES,
        headers=said(read),
        engine=registry.library_engine(*(block.key for block in blocks.values())),
    )
    return await answer(request, runtime, plan)

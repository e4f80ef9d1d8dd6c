"""What a family declares (:class:`Declared`), and what it may add: a key from a posted
document (:class:`FromDocument`), rows at posted position ids (:class:`Positions`). The
routes are built from it by :mod:`service.web.families` and :mod:`service.web.positions`."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError

from service.codecs.types import FORMATS, TABLE_FORMATS, Format
from service.encodings.registry import Family, Key, Rows
from service.errors import InvalidParameter
from service.handlers import Block
from service.limits import Limits
from service.runtime import Runtime
from service.schemas.common import Read
from service.web.answers import Offer

Q = TypeVar("Q", bound=BaseModel)
K = TypeVar("K", bound=Key)


class _Formatted(Protocol):
    """A table query: the format it names, if any (:meth:`Declared.offer`)."""

    @property
    def format(self) -> Format | None: ...


@dataclass(frozen=True, slots=True)
class FromDocument:
    """A key from a posted document (a model's ``config.json``): ``read`` parses and checks
    its bytes (in a worker thread), ``fields`` turns what it read into the ``GET``'s
    parameters (or a :class:`Read`: several tables, one per kind of layer, and the
    fields read), which the request's own (``query``: what the document does not say)
    override; ``missing`` says what to give for a required parameter found in neither."""

    read: Callable[[bytes | bytearray], dict[str, Any]]
    fields: Callable[[dict[str, Any], Mapping[str, Any]], dict[str, Any] | Read]
    query: type[BaseModel]
    summary: str
    operation_id: str
    body: str
    missing: Mapping[str, str] = field(default_factory=dict)
    suffix: str = "/from-config"
    # the request's parameters that say how to read the document, not the table's
    reading: tuple[str, ...] = ()

    def parameters(
        self,
        read: Read,
        asked: Mapping[str, Any],
        table: str = "",
        under: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``GET``'s parameters of the table ``table`` of what a document said
        (``read``; ``""`` where it makes one table), for the table's ``GET``, its audit and a
        comparison alike: the request's (``asked``; those that say how to read the document
        left out) over the document's, over ``under`` (a caller's own defaults: a
        comparison's range). A required parameter found in none is refused as ``missing``
        says, naming the table where the document makes several."""
        given = {**read.tables[table]}
        given |= {name: value for name, value in asked.items() if name not in self.reading}
        for name, value in (under or {}).items():
            given.setdefault(name, value)
        for name, message in self.missing.items():
            if name not in given:
                raise InvalidParameter(name, f"{message} ({table})" if table else message)
        return given

    def several(self, read: Read) -> str | None:
        """Why ``read`` holds no single table (the config makes one per kind of layer),
        for a refusal where one is needed; None where it holds one."""
        if "" in read.tables:
            return None
        return f"the config makes one table per layer type ({', '.join(read.tables)})"


def one_axis(key: Any) -> int:
    """Ids of one axis, whatever the key (:class:`Positions`' default)."""
    return 1


@dataclass(frozen=True, slots=True)
class Positions(Generic[K]):
    """Rows at posted position ids. ``axes(key)``: 1 for ids of one axis (``(L,)`` or
    ``(B, L)``), ``n`` for a leading axis of ``n`` (an M-RoPE table's ``(3, L)``, a grid's
    ``(2, L)``); ``integers``: ids are integers (else any finite numbers, as diffusion
    timesteps); ``at(key, ids)``: the ``(N, width)`` rows of ``ids`` shaped ``(N,)`` or
    ``(n, N)``; required but for integer ids of one axis of a cached table, whose rows are
    read from the cache's pages where dense."""

    summary: str
    operation_id: str
    axes: Callable[[K], int] = one_axis
    integers: bool = True
    at: Callable[[K, Any], Rows] | None = None
    # the ids' shape as the Open Inference Protocol's metadata states it (-1: it varies):
    # by default ``(-1,)`` for ids of one axis, ``(-1, -1)`` (``(axes, L)``) for a family
    # that declares axes; given where a family's usual ids are of one axis though some
    # keys take more (rotary: M-RoPE's ``(3, L)``)
    shape: tuple[int, ...] | None = None

    @property
    def stated(self) -> tuple[int, ...]:
        """The ids' shape in the protocol's metadata."""
        if self.shape is not None:
            return self.shape
        return (-1,) if self.axes is one_axis else (-1, -1)


@dataclass(frozen=True, slots=True)
class Declared(Generic[Q, K]):
    """A family as its routes are built: the registry's family, the ``GET``'s path (default
    ``/v1/encodings/{name}``), query model and JSON answer's model; the query's key
    (``key_cost``: what building it costs in table numbers, 0: built on the event loop),
    the block it names, and the fields its answers state; ``width_name``: how limits name a
    row's width; ``check``: limits of its own instead of a table's; ``shape``: what
    ``X-Shape`` holds, for its OpenAPI."""

    family: Family[K]
    query: type[Q]
    key: Callable[[Q], K]
    block: Callable[[Q, K], Block]
    describe: Callable[[Q, K], Mapping[str, Any]]
    document: type[BaseModel]
    summary: str
    operation_id: str
    path: str = ""
    width_name: str = "width"
    key_cost: Callable[[Q], int] = lambda query: 0
    check: Callable[[Q, Limits, Format], None] | None = None
    shape: str = "rows,cols of the block"
    answer: str = "The table."
    from_document: FromDocument | None = None
    positions: Positions[K] | None = None
    # the path counts in the ETag (two families' fields may coincide); False for the
    # families whose tags predate the seam, which clients and caches hold
    path_in_etag: bool = True
    tag: str = ""  # its routes' group in the OpenAPI document; default the family's name
    # ``GET /v1/audit/{name}`` (:mod:`service.web.audits`): its family carries the audit's
    # record (``registry.Audit``), or its routes are refused when they are built
    audit: bool = False
    # the name of its answer's array where a row holds one, as the Open Inference
    # Protocol's model names its output (a row's named arrays are named as they are)
    output: str = "encodings"

    def __post_init__(self) -> None:
        if "format" not in self.query.model_fields:
            raise TypeError(f"{self.family.name}: its query must name its answer's format")

    @property
    def formats(self) -> tuple[Format, ...]:
        """The formats its tables are offered in (a row's named arrays: npz's members)."""
        return FORMATS if self.family.arrays else TABLE_FORMATS

    def offer(self, query: Q) -> Offer[Format]:
        """What an answer of ``query`` is offered in, and the format it names."""
        return Offer(self.formats, cast(_Formatted, query).format)

    @property
    def resource(self) -> str:
        return self.path or f"/v1/encodings/{self.family.name}"

    async def key_of(self, runtime: Runtime, query: Q) -> K:
        """The query's key, checked: off the event loop where building it costs work (a new
        rotary key's exact frequencies)."""
        cost = self.key_cost(query)
        return self.key(query) if cost == 0 else await runtime.compute(cost, self.key, query)

    def preloaded(self, text: str) -> tuple[Key, int]:
        """``PE_PRELOAD``'s ``NAME?QUERY``: the key of a table and its rows from 0."""
        if self.family.block is not None:
            raise ValueError(f"{self.family.name} is computed per request, never kept")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=True)
        fields = dict(pairs)
        if len(fields) < len(pairs):
            raise ValueError("a parameter is given more than once; give each parameter once")
        try:
            query = self.query.model_validate(fields)
        except ValidationError as exc:  # as a problem's detail says it, on one line
            errors = exc.errors(include_url=False)
            said = (f"{'.'.join(map(str, e['loc'])) or 'query'}: {e['msg']}" for e in errors)
            raise ValueError("; ".join(said)) from None
        key = self.key(query)
        return key, self.block(query, key).stop

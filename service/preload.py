"""``PE_PRELOAD``: the tables computed at start-up, parsed once into family keys and rows,
and computed into the cache before the service says it is ready. An item is a sinusoidal
table's short form (``MAXLENxDMODEL[@BASE][:LAYOUT][:DTYPE]``) or any cached family's
``NAME?QUERY``, its ``GET``'s query string (a comma inside a value written ``%2C``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from service.cache import Cache
from service.encodings import registry
from service.encodings.registry import DTYPES, Key
from service.encodings.sinusoidal import DEFAULT_BASE, LAYOUTS, SinusoidalKey
from service.errors import InvalidParameter, ServiceError
from service.limits import Limits
from service.runtime import Runtime
from service.settings import Settings

logger = logging.getLogger("service")
SYNTAX: Final = "MAXLENxDMODEL[@BASE][:LAYOUT][:DTYPE] or NAME?QUERY"
# a family's name -> its reader of a GET's query string: the key and the rows from 0
Reader = Callable[[str], tuple[Key, int]]
_ITEM: Final = re.compile(
    r"(?P<max_len>\d+)x(?P<d_model>\d+)(?:@(?P<base>[^:]+))?(?P<rest>(?::\w+)*)"
)


@dataclass(frozen=True, slots=True)
class Preload:
    """One table named in ``PE_PRELOAD``: its key, and how many rows from position 0."""

    key: Key
    rows: int


def parse(text: str, readers: Mapping[str, Reader] | None = None) -> list[Preload]:
    """``512x512,2048x1024@10000:split:float64,rotary?max_len=8192&head_dim=128`` as table
    specifications (``readers``: the families' query readers, by name); ``ValueError``
    naming the item that is neither form, or that its family refuses."""
    tables = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, mark, query = item.partition("?")
        if mark:
            tables.append(_read(item, name, query, readers or {}))
            continue
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"PE_PRELOAD: {item!r} is not {SYNTAX}")
        words = [word for word in match["rest"].split(":") if word]
        layouts = [word for word in words if word in LAYOUTS]
        dtypes = [word for word in words if word in DTYPES]
        unknown = [word for word in words if word not in (*LAYOUTS, *DTYPES)]
        if unknown or len(layouts) > 1 or len(dtypes) > 1:
            raise ValueError(f"PE_PRELOAD: {item!r}: {words} are not one layout and one dtype")
        try:
            base = float(match["base"]) if match["base"] else DEFAULT_BASE
            key = SinusoidalKey(
                int(match["d_model"]),
                base,
                layouts[0] if layouts else "interleaved",
                dtypes[0] if dtypes else "float32",
            )
        except (ValueError, InvalidParameter) as exc:
            raise ValueError(f"PE_PRELOAD: {item!r}: {exc}") from None
        if int(match["max_len"]) < 1:
            raise ValueError(f"PE_PRELOAD: {item!r}: max_len must be positive")
        tables.append(Preload(key, int(match["max_len"])))
    return tables


def _read(item: str, name: str, query: str, readers: Mapping[str, Reader]) -> Preload:
    """A ``NAME?QUERY`` item, read by its family's reader."""
    if name not in readers:
        raise ValueError(f"PE_PRELOAD: {item!r}: no family {name!r} ({', '.join(readers)})")
    try:
        key, rows = readers[name](query)
    except ServiceError as exc:
        raise ValueError(f"PE_PRELOAD: {item!r}: {exc.detail}") from None
    except ValueError as exc:  # pydantic's ValidationError too: one line of it
        raise ValueError(f"PE_PRELOAD: {item!r}: {' '.join(str(exc).split())}") from None
    return Preload(key, rows)


def checked(settings: Settings, readers: Mapping[str, Reader] | None = None) -> list[Preload]:
    """``PE_PRELOAD``'s tables, parsed and checked (``ValueError`` otherwise)."""
    tables = parse(settings.preload, readers)
    check(tables, Limits.of(settings), settings.cache_bytes)
    return tables


def check(tables: list[Preload], limits: Limits, cache_bytes: int) -> None:
    """Each preloaded table within the request limits, and all of them within the cache's
    budget, where they are kept (``ValueError`` otherwise: a service that said it was
    ready with its tables computed and dropped would mislead)."""
    for table in tables:
        try:
            limits.row_width(table.key.width)
            limits.rows(table.rows, table.key.width)
            limits.last_position(table.rows - 1 + registry.shift(table.key))
        except ServiceError as exc:
            raise ValueError(f"PE_PRELOAD: {exc.detail}") from None
    cache = Cache(cache_bytes)  # for its page arithmetic
    held = sum(_held_bytes(cache, table) for table in tables)
    if held > cache_bytes:
        raise ValueError(
            f"PE_PRELOAD: the tables take {held:,} bytes in the cache, over PE_CACHE_BYTES "
            f"({cache_bytes:,}): raise PE_CACHE_BYTES or preload less"
        )


def _held_bytes(cache: Cache, table: Preload) -> int:
    """What a table's rows take in ``cache``: their whole pages."""
    size = cache.page_rows(table.key)
    pages = -(-table.rows // size)
    return pages * (size * registry.row_bytes(table.key) + registry.key_bytes(table.key))


async def run(tables: list[Preload], runtime: Runtime) -> None:
    """Compute every table into the cache, then mark the service ready; a failure is kept
    for ``/readyz`` to report, and the process stays up."""
    try:
        for table in tables:
            elements = table.rows * table.key.width
            await runtime.compute(elements, runtime.cache.rows, table.key, 0, table.rows)
            logger.info("preloaded %s with %d rows", table.key, table.rows)
    except Exception as exc:
        logger.exception("preloading failed")
        runtime.preload_error = repr(exc)
    else:
        runtime.ready = True

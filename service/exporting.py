"""How ``python -m service export`` asks the app, in this process
(:mod:`service.server.inprocess`): a table cached by rows, as ``.npy`` or raw, a block of
rows at a time, so that what it holds is a block (4 MiB) whatever the table's size; anything
else whole, holding what the service holds to answer it (docs/settings.md, Memory).

Block by block, the file is still byte for byte the whole answer: the whole request is
asked first with ``If-None-Match: *``, which the app answers with a 304 once every parameter
and limit has passed, before it computes anything (or refuses it as it would); each block is
the same ``GET`` with ``start``, ``stop`` and ``format=raw``, whose rows the family's
declaration says are those rows of the same table (checked, else the whole is asked); a row
is bit-identical however it is computed (RELIABILITY.md); and the ``.npy`` header is the one
its codec writes for the whole shape. The arrays of a table of several (rotary's ``cos`` and
``sin``, stacked in ``.npy`` and raw) have each block's rows written where their array's
go, in a file that can seek (to standard output, such a table is asked whole)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Mapping
from typing import Any, BinaryIO, Final

import numpy as np

from service.codecs import npy
from service.encodings import registry
from service.errors import ServiceError
from service.handlers import Block
from service.settings import Settings
from service.web.declared import Declared

# the rows of a block: this many bytes of the answer (within the inline encodings' 4 MiB,
# under a large answer's permit)
BLOCK_BYTES: Final = 4 << 20
_BLOCKWISE: Final = ("npy", "raw")
_ANY: Final = {"if-none-match": "*"}


class ExportError(Exception):
    """A table the service refuses: the problem's status and detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """A table asked a block of rows at a time: the ``GET``'s path and query, the block the
    query names, and how many rows a block holds."""

    path: str
    query: dict[str, str]
    whole: Block
    step: int


async def ask(
    settings: Settings,
    method: str,
    path: str,
    query: dict[str, str],
    body: bytes | None,
    out: BinaryIO,
) -> None:
    """The app's answer to ``method path?query`` (with ``body``) under ``settings``, written
    to ``out`` (a block of rows at a time where it can be); :class:`ExportError` where the
    app refuses it."""
    from service.app import create_app
    from service.server import inprocess

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        status = 304
        if method == "GET" and query.get("format") in _BLOCKWISE:
            # every check of the whole request, by the app, before anything is computed
            checked = await inprocess.request(app, method, path, query, None, out.write, _ANY)
            status, _, refusal = checked
            plan = _plan(path, query, out.seekable()) if status == 304 else None
            if plan is not None:
                await _blockwise(app, plan, out)
                return
        if status == 304:
            status, _, refusal = await inprocess.request(app, method, path, query, body, out.write)
    if status != 200:
        raise _refused(status, refusal)


def _plan(path: str, query: dict[str, str], seekable: bool) -> _Plan | None:
    """How ``path?query`` is asked a block of rows at a time, if it can be."""
    from service.routes import FAMILIES

    declared = next((each for each in FAMILIES if each.resource == path), None)
    if declared is None or declared.family.block is not None:
        return None  # no table of rows, or one computed per request
    whole = _block(declared, query)
    if whole is None or (registry.arrays(whole.key) and not seekable):
        return None
    row_bytes = (whole.dim_stop - whole.dim_start) * np.dtype(whole.key.dtype).itemsize
    step = max(1, BLOCK_BYTES // max(1, row_bytes))
    last = whole.start + (whole.stop - 1 - whole.start) // step * step
    for start in {whole.start, last}:  # the first and the last block are the whole's rows
        stop = min(start + step, whole.stop)
        rows = _block(declared, {**query, "start": str(start), "stop": str(stop)})
        if rows != dataclasses.replace(whole, start=start, stop=stop):
            return None
    return _Plan(path, query, whole, step)


def _block(declared: Declared[Any, Any], query: Mapping[str, str]) -> Block | None:
    """The block ``query`` names, as the family's ``GET`` reads it; None where it is refused
    (the app says why)."""
    try:
        parsed = declared.query.model_validate(query)
        return declared.block(parsed, declared.key(parsed))
    except (ServiceError, ValueError):  # pydantic's ValidationError too
        return None


async def _blockwise(app: Any, plan: _Plan, out: BinaryIO) -> None:
    from service.server import inprocess

    whole, head = plan.whole, 0
    rows = whole.stop - whole.start
    for start in range(whole.start, whole.stop, plan.step):
        stop = min(start + plan.step, whole.stop)
        query = {**plan.query, "start": str(start), "stop": str(stop), "format": "raw"}
        block = io.BytesIO()
        status, headers, refusal = await inprocess.request(
            app, "GET", plan.path, query, None, block.write
        )
        if status != 200:
            raise _refused(status, refusal)
        shape = tuple(int(n) for n in headers["x-shape"].split(","))
        dtype = np.dtype(headers["x-dtype"])
        data = block.getbuffer()
        size = math.prod(shape) * dtype.itemsize
        if len(shape) < 2 or shape[-2] != stop - start or len(data) != size:
            raise RuntimeError(f"rows {start}..{stop}: {shape} in {len(data)} bytes")
        if start == whole.start and plan.query["format"] == "npy":
            header = npy.header((*shape[:-2], rows, shape[-1]), dtype)
            out.write(header)
            head = len(header)
        # a block holds each array's rows in turn (one array: the rows themselves)
        arrays, span = math.prod(shape[:-2]), len(data) // math.prod(shape[:-2])
        for each in range(arrays):
            if arrays > 1:
                row = shape[-1] * dtype.itemsize
                out.seek(head + each * rows * row + (start - whole.start) * row)
            out.write(data[each * span : (each + 1) * span])
        data.release()


def _refused(status: int, refusal: bytes) -> ExportError:
    """The app's problem document as an :class:`ExportError`: its detail."""
    try:
        document = json.loads(refusal)
    except ValueError:
        document = None
    if isinstance(document, dict) and "detail" in document:
        return ExportError(status, str(document["detail"]))
    return ExportError(status, refusal.decode(errors="replace"))

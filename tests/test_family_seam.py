"""The family seam: a stub family (one numpy module's worth: a key, ``fill``, ``take``) and
one thin route get the cache, formats, validators, 304s, replay, limits, the cache listing
and the client with no other change."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated

import httpx
import numpy as np
import pytest
from fastapi import APIRouter, Query, Request, Response
from numpy.typing import NDArray
from posenc_client import Client
from pydantic import BaseModel, ConfigDict, Field

from service import handlers
from service.app import create_app
from service.codecs.types import TableFormat
from service.encodings import registry
from service.encodings.registry import DType, Family, Rows
from service.settings import Settings
from service.web.deps import RuntimeDep
from service.web.responses import table_response
from tests.support import assert_problem, cache_stats, in_process, load

PATH = "/v1/encodings/ramp"


# -- the numpy module: row p of the table is p, p + step, p + 2 step, ... -------------


@dataclass(frozen=True, slots=True)
class RampKey:
    width: int
    step: float = 1.0
    dtype: DType = "float32"


def fill(key: RampKey, start: int, out: Sequence[Rows]) -> None:
    columns = np.arange(key.width) * key.step
    for part in out:
        part[...] = np.arange(start, start + len(part))[:, None] + columns
        start += len(part)


def take(key: RampKey, positions: NDArray[np.int64]) -> Rows:
    out = np.empty((len(positions), key.width), dtype=key.dtype)
    out[...] = positions[:, None] + np.arange(key.width) * key.step
    return out


# -- the route module ---------------------------------------------------------------------


class RampQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_len: int = Field(ge=1)
    width: int = Field(ge=1)
    step: float = 1.0
    dtype: DType = "float32"
    start: int = Field(0, ge=0)
    stop: int | None = None
    dim_start: int = Field(0, ge=0)
    dim_stop: int | None = None
    format: TableFormat | None = None


router = APIRouter()


@router.get(PATH)
async def get_ramp(
    query: Annotated[RampQuery, Query()], request: Request, runtime: RuntimeDep
) -> Response:
    stop = query.stop or query.max_len
    key = RampKey(query.width, query.step, query.dtype)
    columns = query.dim_stop or query.width
    block = handlers.Block(key, query.start, stop, query.dim_start, columns, query.max_len)
    return await table_response(request, runtime, block, query.model_dump(), query.format, "width")


# -- what it gets -------------------------------------------------------------------------


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with registry.registered(Family("ramp", RampKey, fill, take)):
        app = create_app(Settings(max_elements=1 << 16))
        app.include_router(router)
        with in_process(app) as client:
            yield client


def ramp(start: int, stop: int, width: int) -> NDArray[np.float64]:
    return np.arange(start, stop)[:, None] + np.arange(width, dtype=np.float64)


def test_a_stub_family_is_served_in_every_format(http: httpx.Client) -> None:
    for fmt in ("json", "npy", "raw"):
        response = http.get(f"{PATH}?max_len=3000&width=5&start=2990&format={fmt}")
        assert response.status_code == 200, response.text
        assert np.array_equal(load(response), ramp(2990, 3000, 5))
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"


def test_it_is_paged_cached_listed_and_replayed(http: httpx.Client) -> None:
    url = f"{PATH}?max_len=100000&width=8&start=99990&format=npy"
    first = http.get(url)
    stats = cache_stats(http)
    (table,) = stats["tables"]
    assert table["family"] == "ramp"
    assert table["key"] == {"width": 8, "step": 1.0, "dtype": "float32"}
    assert table["pages"] == 1  # the page holding rows 99,990 .. 99,999, not the rows before
    again = http.get(url)
    assert again.content == first.content
    assert cache_stats(http)["response_hits"] == stats["response_hits"] + 1
    tagged = http.get(url, headers={"if-none-match": first.headers["etag"]})
    assert tagged.status_code == 304


def test_its_limits_name_its_width(http: httpx.Client) -> None:
    assert_problem(http.get(f"{PATH}?max_len=100000&width=8"), 422, "rows × width")
    assert_problem(http.get(f"{PATH}?max_len=4294967296&width=8&stop=3"), 422, "PE_MAX_POSITION")


def test_the_client_asks_for_it_by_its_parameters(http: httpx.Client) -> None:
    table = Client(http=http).encoding("ramp", 50, start=45, width=4, step=0.5)
    assert np.array_equal(table, np.arange(45, 50)[:, None] + 0.5 * np.arange(4))

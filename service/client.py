"""A typed Python client for the service, sync (:class:`Client`) and async
(:class:`AsyncClient`), on httpx. Tables and results travel as ``.npy``.

    from service.client import Client

    with Client("http://127.0.0.1:8000") as pe:
        table = pe.table(2048, 512)                      # numpy (2048, 512) float32
        y = pe.apply(x, position_ids=ids)                # x * sqrt(d_model) + PE[ids]
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import Any, Self

import httpx
import numpy as np
from numpy.typing import ArrayLike, NDArray

from service import codecs
from service.core import DEFAULT_BASE, DType, Layout

TABLE = "/v1/encodings/sinusoidal"
APPLY = "/v1/encodings/sinusoidal/apply"
NPY = codecs.MEDIA_TYPES["npy"]


class ProblemError(Exception):
    """The service answered with an error; ``problem`` is its RFC 9457 document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        super().__init__(f"{status} {self.title}: {self.detail}")


def _table_params(
    max_len: int,
    d_model: int,
    base: float,
    layout: Layout,
    dtype: DType,
    start: int,
    stop: int | None,
    dim_start: int,
    dim_stop: int | None,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "max_len": max_len,
        "d_model": d_model,
        "base": repr(float(base)),
        "layout": layout,
        "dtype": dtype,
        "start": start,
        "dim_start": dim_start,
        "format": "npy",
    }
    if stop is not None:
        params["stop"] = stop
    if dim_stop is not None:
        params["dim_stop"] = dim_stop
    return params


def _apply_request(
    batch: ArrayLike,
    position_ids: ArrayLike | None,
    scale: float | None,
    offset: int,
    max_len: int | None,
    base: float,
    layout: Layout,
) -> dict[str, Any]:
    """The keyword arguments of ``httpx.Client.post`` for an apply."""
    params: dict[str, Any] = {"offset": offset, "base": repr(float(base)), "layout": layout}
    params["format"] = "npy"
    if scale is not None:
        params["scale"] = repr(float(scale))
    if max_len is not None:
        params["max_len"] = max_len
    buffer = io.BytesIO()
    if position_ids is None:
        np.save(buffer, np.asarray(batch), allow_pickle=False)
        kind = NPY
    else:
        np.savez(buffer, embeddings=np.asarray(batch), position_ids=np.asarray(position_ids))
        kind = codecs.MEDIA_TYPES["npz"]
    return {"params": params, "content": buffer.getvalue(), "headers": {"content-type": kind}}


def _array(response: httpx.Response) -> NDArray[Any]:
    """The ``.npy`` array in a successful response, else :class:`ProblemError`."""
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text}
        raise ProblemError(response.status_code, problem)
    return np.array(codecs.decode_npy(response.content))


def _json(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise ProblemError(response.status_code, response.json())
    document: dict[str, Any] = response.json()
    return document


class Client:
    """The service over HTTP, blocking."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)

    def table(
        self,
        max_len: int,
        d_model: int,
        *,
        base: float = DEFAULT_BASE,
        layout: Layout = "interleaved",
        dtype: DType = "float32",
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
    ) -> NDArray[Any]:
        """The table ``(max_len, d_model)``, or its block ``[start:stop, dim_start:dim_stop]``."""
        params = _table_params(
            max_len, d_model, base, layout, dtype, start, stop, dim_start, dim_stop
        )
        return _array(self.http.get(TABLE, params=params))

    def apply(
        self,
        batch: ArrayLike,
        *,
        position_ids: ArrayLike | None = None,
        scale: float | None = None,
        offset: int = 0,
        max_len: int | None = None,
        base: float = DEFAULT_BASE,
        layout: Layout = "interleaved",
    ) -> NDArray[Any]:
        """``batch * scale + PE[positions]``; ``scale`` defaults to ``sqrt(d_model)``."""
        request = _apply_request(batch, position_ids, scale, offset, max_len, base, layout)
        return _array(self.http.post(APPLY, **request))

    def cache_stats(self) -> dict[str, Any]:
        """The service's cache statistics (``GET /v1/cache``)."""
        return _json(self.http.get("/v1/cache"))

    def ready(self) -> bool:
        """Whether the service answers ``/readyz`` with 200."""
        return self.http.get("/readyz").status_code == 200

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """The service over HTTP, for asyncio and trio."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        timeout: float = 60.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)

    async def table(
        self,
        max_len: int,
        d_model: int,
        *,
        base: float = DEFAULT_BASE,
        layout: Layout = "interleaved",
        dtype: DType = "float32",
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
    ) -> NDArray[Any]:
        """The table ``(max_len, d_model)``, or its block ``[start:stop, dim_start:dim_stop]``."""
        params = _table_params(
            max_len, d_model, base, layout, dtype, start, stop, dim_start, dim_stop
        )
        return _array(await self.http.get(TABLE, params=params))

    async def apply(
        self,
        batch: ArrayLike,
        *,
        position_ids: ArrayLike | None = None,
        scale: float | None = None,
        offset: int = 0,
        max_len: int | None = None,
        base: float = DEFAULT_BASE,
        layout: Layout = "interleaved",
    ) -> NDArray[Any]:
        """``batch * scale + PE[positions]``; ``scale`` defaults to ``sqrt(d_model)``."""
        request = _apply_request(batch, position_ids, scale, offset, max_len, base, layout)
        return _array(await self.http.post(APPLY, **request))

    async def cache_stats(self) -> dict[str, Any]:
        """The service's cache statistics (``GET /v1/cache``)."""
        return _json(await self.http.get("/v1/cache"))

    async def ready(self) -> bool:
        """Whether the service answers ``/readyz`` with 200."""
        return (await self.http.get("/readyz")).status_code == 200

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

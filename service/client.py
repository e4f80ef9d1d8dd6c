"""A typed Python client for the service, sync (:class:`Client`) and async
(:class:`AsyncClient`), on httpx. Tables and results travel as ``.npy``. Any family's
table is asked for by its key (:meth:`Client.encoding`); :meth:`Client.table` is the
sinusoidal one by its parameters.

    from service.client import Client

    with Client("http://127.0.0.1:8000") as pe:
        table = pe.table(2048, 512)                      # numpy (2048, 512) float32
        y = pe.apply(x, position_ids=ids)                # x * sqrt(d_model) + PE[ids]
"""

from __future__ import annotations

import dataclasses
import io
from types import TracebackType
from typing import Any, Self

import httpx
import numpy as np
from numpy.typing import ArrayLike, NDArray

from service.codecs import npy
from service.codecs.types import MEDIA_TYPES
from service.encodings.registry import DType, Key, Rounding, family_of
from service.encodings.sinusoidal import FAMILY, Layout, preset_key

APPLY = f"/v1/encodings/{FAMILY.name}/apply"
NPY = MEDIA_TYPES["npy"]


class ProblemError(Exception):
    """The service answered with an error; ``problem`` is its RFC 9457 document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        super().__init__(f"{status} {self.title}: {self.detail}")


def _wire(value: Any) -> Any:
    """A parameter's value as the query string says it: floats in full, booleans lower."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else value


def _table_request(
    key: Key, max_len: int, start: int, stop: int | None, dim_start: int, dim_stop: int | None
) -> tuple[str, dict[str, Any]]:
    """The path and query parameters of a table of ``key``: its fields are the parameters."""
    # a family's key may say how a request names it; else its fields are the parameters
    fields = key.query() if hasattr(key, "query") else dataclasses.asdict(key)
    params: dict[str, Any] = {name: _wire(value) for name, value in fields.items()}
    params.update(max_len=max_len, start=start, dim_start=dim_start, format="npy")
    if stop is not None:
        params["stop"] = stop
    if dim_stop is not None:
        params["dim_stop"] = dim_stop
    return f"/v1/encodings/{family_of(key).name}", params


def _options(names: dict[str, Any]) -> dict[str, Any]:
    """An apply method's keyword arguments, from its ``locals()``."""
    return {
        k: v for k, v in names.items() if k not in ("self", "batch", "position_ids", "parameters")
    }


def _apply_request(
    batch: ArrayLike, position_ids: ArrayLike | None, **given: Any
) -> dict[str, Any]:
    """The keyword arguments of ``httpx.Client.post`` for an apply with the ``given``
    parameters (those that are ``None`` are the service's defaults)."""
    params = {name: _wire(value) for name, value in given.items() if value is not None}
    if given.get("preset") == "vaswani":
        params.pop("rounding", None)
    params["format"] = "npy"
    buffer = io.BytesIO()
    if position_ids is None:
        np.save(buffer, np.asarray(batch), allow_pickle=False)
        kind = NPY
    else:
        np.savez(buffer, embeddings=np.asarray(batch), position_ids=np.asarray(position_ids))
        kind = MEDIA_TYPES["npz"]
    return {"params": params, "content": buffer.getvalue(), "headers": {"content-type": kind}}


def _array(response: httpx.Response) -> NDArray[Any]:
    """The ``.npy`` array in a successful response, else :class:`ProblemError`."""
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text}
        raise ProblemError(response.status_code, problem)
    return np.array(npy.decode(response.content))


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
        base: float | None = None,
        layout: Layout | None = None,
        dtype: DType = "float32",
        preset: str = "vaswani",
        rounding: Rounding = "library",
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
        **parameters: Any,
    ) -> NDArray[Any]:
        """The table ``(max_len, d_model)``, or its block ``[start:stop, dim_start:dim_stop]``,
        of ``preset`` (with its own ``parameters``, e.g. ``padding_idx=1``)."""
        given = {"base": base, **parameters}
        key = preset_key(d_model, dtype, preset, rounding, given, layout)
        return self.encoding(
            key, max_len, start=start, stop=stop, dim_start=dim_start, dim_stop=dim_stop
        )

    def encoding(
        self,
        key: Key,
        max_len: int,
        *,
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
    ) -> NDArray[Any]:
        """The table of any family's ``key`` with ``max_len`` rows, or a block of it."""
        path, params = _table_request(key, max_len, start, stop, dim_start, dim_stop)
        return _array(self.http.get(path, params=params))

    def apply(
        self,
        batch: ArrayLike,
        *,
        position_ids: ArrayLike | None = None,
        scale: float | None = None,
        offset: int | None = None,
        max_len: int | None = None,
        base: float | None = None,
        layout: Layout | None = None,
        preset: str = "vaswani",
        rounding: Rounding = "library",
        **parameters: Any,
    ) -> NDArray[Any]:
        """``batch * scale + PE[positions]`` of ``preset``; ``scale`` and ``offset`` default
        to the preset's (``sqrt(d_model)`` and 0 for the paper's table)."""
        request = _apply_request(batch, position_ids, **_options(locals()), **parameters)
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
        base: float | None = None,
        layout: Layout | None = None,
        dtype: DType = "float32",
        preset: str = "vaswani",
        rounding: Rounding = "library",
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
        **parameters: Any,
    ) -> NDArray[Any]:
        """As :meth:`Client.table`."""
        key = preset_key(d_model, dtype, preset, rounding, {"base": base, **parameters}, layout)
        return await self.encoding(
            key, max_len, start=start, stop=stop, dim_start=dim_start, dim_stop=dim_stop
        )

    async def encoding(
        self,
        key: Key,
        max_len: int,
        *,
        start: int = 0,
        stop: int | None = None,
        dim_start: int = 0,
        dim_stop: int | None = None,
    ) -> NDArray[Any]:
        """The table of any family's ``key`` with ``max_len`` rows, or a block of it."""
        path, params = _table_request(key, max_len, start, stop, dim_start, dim_stop)
        return _array(await self.http.get(path, params=params))

    async def apply(
        self,
        batch: ArrayLike,
        *,
        position_ids: ArrayLike | None = None,
        scale: float | None = None,
        offset: int | None = None,
        max_len: int | None = None,
        base: float | None = None,
        layout: Layout | None = None,
        preset: str = "vaswani",
        rounding: Rounding = "library",
        **parameters: Any,
    ) -> NDArray[Any]:
        """``batch * scale + PE[positions]`` of ``preset``; ``scale`` and ``offset`` default
        to the preset's (``sqrt(d_model)`` and 0 for the paper's table)."""
        request = _apply_request(batch, position_ids, **_options(locals()), **parameters)
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

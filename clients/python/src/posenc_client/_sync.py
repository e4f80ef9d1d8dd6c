"""The blocking client."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from numpy.typing import ArrayLike

from posenc_client import _wire
from posenc_client._encoding import (
    Array,
    Convention,
    DType,
    Form,
    Layout,
    Rounding,
    Scaling,
    Value,
    read_config,
)
from posenc_client._sync_models import Models
from posenc_client._wire import ROTARY, SINUSOIDAL, Call, given

T = TypeVar("T")


class Client(Models):
    """The service over HTTP, blocking. Every parameter left ``None`` is the service's
    default; keyword arguments beyond the named ones are passed on as they are named in the
    service's query string (a preset's own, e.g. ``padding_idx=1``; a RoPE scaling's, e.g.
    ``factor=8.0``). Error answers raise :class:`~posenc_client.ProblemError`."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)

    def _send(self, call: Call[T]) -> T:
        response = self.http.request(
            call.method, call.path, params=call.params, content=call.content, headers=call.headers
        )
        return call.decode(response)

    def table(
        self,
        max_len: int,
        d_model: int,
        *,
        base: float | None = None,
        layout: Layout | None = None,
        dtype: DType | None = None,
        preset: str | None = None,
        rounding: Rounding | None = None,
        start: int | None = None,
        stop: int | None = None,
        dim_start: int | None = None,
        dim_stop: int | None = None,
        **parameters: Value,
    ) -> Array:
        """The sinusoidal table ``(max_len, d_model)``, or its block ``[start:stop,
        dim_start:dim_stop]``, of ``preset`` (default the paper's, ``vaswani``)."""
        return self._send(_wire.table("sinusoidal", given(locals(), parameters)))

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
        preset: str | None = None,
        rounding: Rounding | None = None,
        **parameters: Value,
    ) -> Array:
        """``batch * scale + PE[positions]`` for a ``(L, d_model)`` or ``(batch, L,
        d_model)`` float batch; ``scale`` and ``offset`` default to the preset's
        (``sqrt(d_model)`` and 0 for the paper's table)."""
        request = given(locals(), parameters)
        return self._send(_wire.apply(SINUSOIDAL + "/apply", batch, position_ids, request))

    def rotary(
        self,
        max_len: int,
        head_dim: int,
        *,
        base: float | None = None,
        convention: Convention | None = None,
        scaling: Scaling | None = None,
        partial_rotary_factor: float | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        start: int | None = None,
        stop: int | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """The rotary (RoPE) tables ``(cos, sin)``, each ``(rows, rotary_dim)``; the
        scaling's parameters under Hugging Face's names (``factor=8.0``, ...)."""
        return self._send(_wire.rotary(given(locals(), parameters)))

    def from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        max_len: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        convention: Convention | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        layer_type: str | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """A model's rotary tables ``(cos, sin)`` from its Hugging Face ``config.json``
        (parsed, a path to it, or its bytes), as :meth:`rotary` gives them; ``max_len``
        defaults to the config's ``max_position_embeddings``, and the parameters given here
        override the config's; where its rope parameters are per layer type, ``layer_type``
        names the table (:meth:`rotary_layers` gives them all)."""
        request = given(locals(), parameters)
        return self._send(_wire.from_config(read_config(config), request))

    def rotary_apply(
        self,
        batch: ArrayLike,
        *,
        position_ids: ArrayLike | None = None,
        offset: int | None = None,
        max_len: int | None = None,
        base: float | None = None,
        convention: Convention | None = None,
        scaling: Scaling | None = None,
        partial_rotary_factor: float | None = None,
        rounding: Rounding | None = None,
        **parameters: Value,
    ) -> Array:
        """Queries or keys ``(..., L, head_dim)`` rotated by their positions' angles."""
        request = given(locals(), parameters)
        return self._send(_wire.apply(ROTARY + "/apply", batch, position_ids, request))

    def alibi_slopes(
        self, num_heads: int, *, dtype: DType | None = None, rounding: Rounding | None = None
    ) -> Array:
        """The ALiBi slopes of ``num_heads`` heads, ``(num_heads,)``."""
        return self._send(_wire.slopes(given(locals(), {})))

    def alibi_bias(
        self,
        num_heads: int,
        max_len: int,
        *,
        key_len: int | None = None,
        form: Form | None = None,
        start: int | None = None,
        stop: int | None = None,
        dtype: DType | None = None,
        rounding: Rounding | None = None,
    ) -> Array:
        """The ALiBi bias ``(num_heads, rows, key_len)``; masked entries are ``-inf``."""
        return self._send(_wire.bias(given(locals(), {})))

    def encoding(self, family: str, max_len: int | None = None, **parameters: Value) -> Array:
        """Any family's table, ``GET /v1/encodings/{family}``, by the parameters its query
        string takes (``max_len`` where it takes one; rotary's is ``(2, rows, rotary_dim)``,
        cos first)."""
        given = parameters if max_len is None else {"max_len": max_len, **parameters}
        return self._send(_wire.table(family, given))

    def presets(self, family: str | None = None) -> list[dict[str, Any]]:
        """A family's presets (the sinusoidal ones by default), each with the code it follows
        (``GET /v1/presets``); none for a family without presets."""
        return self._send(_wire.presets(family))

    def cache_stats(self) -> dict[str, Any]:
        """The service's cache statistics (``GET /v1/cache``)."""
        return self._send(_wire.cache_stats())

    def ready(self) -> bool:
        """Whether the service answers ``/readyz`` with 200."""
        return self._send(_wire.ready())

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

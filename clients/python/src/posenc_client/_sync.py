"""The blocking client."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from numpy.typing import ArrayLike

from posenc_client import _wire
from posenc_client._wire import (
    ROTARY,
    SINUSOIDAL,
    Array,
    Call,
    Convention,
    DType,
    Family,
    Form,
    Layout,
    Mrope,
    RotaryLayers,
    Rounding,
    Scaling,
    Value,
    given,
)

T = TypeVar("T")


def _read(config: Mapping[str, Any] | str | os.PathLike[str] | bytes) -> Mapping[str, Any] | bytes:
    """A ``config.json`` as given, or the bytes of the file at its path: a config.json is a
    few KiB, read where it is asked for, as httpx reads a file body."""
    return Path(config).read_bytes() if isinstance(config, str | os.PathLike) else config


def _table(table: Mapping[str, Any]) -> Mapping[str, Any]:
    """One table of a comparison, its ``config`` read where it is a path."""
    config = table.get("config") if isinstance(table, Mapping) else None
    return table if config is None else {**table, "config": _read(config)}


class Client:
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
        return self._send(_wire.from_config(_read(config), request))

    def rotary_layers(
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
    ) -> RotaryLayers:
        """A model's rotary tables by layer type (Gemma 3 and 4 have one per type), as
        :meth:`from_config` takes the config: ``{"tables": {name: (cos, sin)},
        "layer_types": [each layer's type] or None, "config_fields": [the fields read]}``;
        a config with one set of rope parameters gives one table, named ``""``."""
        request = given(locals(), parameters)
        return self._send(_wire.rotary_layers(_read(config), request))

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

    def rotary_positions(
        self,
        position_ids: ArrayLike,
        *,
        max_len: int,
        head_dim: int,
        base: float | None = None,
        convention: Convention | None = None,
        scaling: Scaling | None = None,
        partial_rotary_factor: float | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        mrope_section: Sequence[int] | str | None = None,
        mrope_interleaved: bool | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """The rotary tables ``(cos, sin)`` at ``position_ids`` (integers, ``(L,)`` or
        ``(B, L)``; with ``mrope_section``, e.g. ``[16, 24, 24]``, M-RoPE's ``(3, L)`` or
        ``(3, B, L)``), each ``(..., L, rotary_dim)``; ``max_len`` is the table's, as for
        :meth:`rotary` (the sequence length ``dynamic`` and ``longrope`` scaling see)."""
        request = given(locals(), parameters)
        return self._send(_wire.rotary_positions(position_ids, request))

    def mrope_positions(
        self,
        segments: Sequence[Mapping[str, Any]],
        *,
        model: Mrope | None = None,
        spatial_merge_size: int | None = None,
        tokens_per_second: int | None = None,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes | None = None,
    ) -> tuple[Array, int]:
        """M-RoPE's position ids ``(3, L)`` (int64) and rope delta for a sequence of
        ``segments`` (``{"text": 5}``, ``{"image": [t, h, w]}``, ``{"video": [t, h, w],
        "seconds_per_grid": 1.0, "frame_text": 2}``), as Qwen2-VL's, Qwen2.5-VL's or
        Qwen3-VL's ``get_rope_index``; the settings given override the ``config``'s."""
        settings = {
            "model": model,
            "spatial_merge_size": spatial_merge_size,
            "tokens_per_second": tokens_per_second,
            "config": _read(config) if config is not None else None,
        }
        return self._send(_wire.mrope_positions(segments, settings))

    def temperature(
        self,
        max_len: int,
        *,
        floor_scale: float | None = None,
        attn_scale: float | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """Llama 4's query scale by position on its layers without RoPE, ``(rows,)``:
        ``log1p(floor((p + 1) / floor_scale)) * attn_scale + 1``."""
        return self._send(_wire.temperature(given(locals(), parameters)))

    def temperature_from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        max_len: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, list[str] | None]:
        """Llama 4's query scales ``(rows,)`` from its ``config.json`` (as
        :meth:`from_config` takes it), and each layer's kind: ``rope``, or ``nope`` (the
        layers the scales are for); ``None`` where the config does not say."""
        request = given(locals(), parameters)
        return self._send(_wire.temperature_from_config(_read(config), request))

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

    def audit(
        self,
        family: Family,
        max_len: int,
        *,
        paths: Sequence[str] | str | None = None,
        bands: Sequence[int] | str | None = None,
        **parameters: Value,
    ) -> dict[str, Any]:
        """How far each computation path's ``family`` table (its parameters as the table's
        ``GET`` takes them, less the rows, columns, dtype and rounding) is from the exact
        one, by position band (``GET /v1/audit/{family}``): ``{"family", "parameters",
        "reference", "thresholds", "every_position_below", "exact_below", "paths": [{"name",
        "description", "bands", "first_over", ...}]}``. ``paths`` picks the paths and their
        order (default every one that applies); ``bands`` the band edges (positions)."""
        request: dict[str, Value] = {"max_len": max_len, "bands": bands, **parameters}
        return self._send(_wire.audit(family, request, paths))

    def audit_png(
        self,
        family: Family,
        max_len: int,
        *,
        paths: Sequence[str] | str | None = None,
        bands: Sequence[int] | str | None = None,
        **parameters: Value,
    ) -> bytes:
        """The audit of :meth:`audit` drawn, error against position (log-log), as PNG
        bytes; a service without its plots extra answers 501."""
        request: dict[str, Value] = {"max_len": max_len, "bands": bands, **parameters}
        return self._send(_wire.audit_png(family, request, paths))

    def compare(
        self, a: Mapping[str, Any], b: Mapping[str, Any], *, stop: int, start: int = 0
    ) -> dict[str, Any]:
        """Tables ``a`` and ``b`` side by side over positions ``start .. stop-1`` (``POST
        /v1/compare``), each ``{"family": "rotary", "parameters": {...}}`` (the ``GET``'s
        parameters) or ``{"family": "rotary", "config": ..., "parameters": {...}}`` (a
        ``config.json`` as :meth:`from_config` takes it, and from-config's parameters):
        ``{"start", "stop", "bands": [{"start", "stop", "samples", "max_difference",
        "mean_difference", "max_angle_drift" (rotary)}], "first_over": {"1e-3": ...}}``."""
        return self._send(_wire.compare(_table(a), _table(b), start, stop))

    def presets(self) -> list[dict[str, Any]]:
        """The sinusoidal presets, each with its source and formula (``GET /v1/presets``)."""
        return self._send(_wire.presets())

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

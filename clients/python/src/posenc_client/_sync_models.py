"""The sync client's calls about a model's own tables (per layer type, at position
ids, M-RoPE's ids, Llama 4's scales) and their precision (audits, comparisons): a base of
:class:`~posenc_client.Client`, which sends them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from numpy.typing import ArrayLike

from posenc_client import _wire
from posenc_client._encoding import (
    Array,
    Convention,
    DType,
    Family,
    Mrope,
    PostedTable,
    RotaryLayers,
    Rounding,
    Scaling,
    TimestepDType,
    Value,
    VisionModel,
    comparison_table,
    read_config,
)
from posenc_client._wire import Call, given

T = TypeVar("T")


class Models:
    """What :class:`~posenc_client.Client` asks of a model's tables."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's own

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
        return self._send(_wire.rotary_layers(read_config(config), request))

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
            "config": read_config(config) if config is not None else None,
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
        return self._send(_wire.temperature_from_config(read_config(config), request))

    def timestep(
        self,
        max_len: int,
        dim: int,
        *,
        preset: str | None = None,
        flip_sin_to_cos: bool | None = None,
        downscale_freq_shift: float | None = None,
        scale: float | None = None,
        max_period: float | None = None,
        time_factor: float | None = None,
        timestep_dtype: TimestepDType | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """Diffusion timestep embeddings of timesteps ``0 .. max_len-1``, ``(rows, dim)``:
        diffusers' ``get_timestep_embedding`` under its parameters' names, FLUX's
        ``time_factor``, the timesteps' dtype, or a ``preset`` (``unet``, ``flux``, ...)."""
        return self._send(_wire.timestep(given(locals(), parameters)))

    def timestep_positions(
        self,
        position_ids: ArrayLike,
        *,
        dim: int,
        preset: str | None = None,
        flip_sin_to_cos: bool | None = None,
        downscale_freq_shift: float | None = None,
        scale: float | None = None,
        max_period: float | None = None,
        time_factor: float | None = None,
        timestep_dtype: TimestepDType | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """The timestep embeddings of ``position_ids``, any finite timesteps ``(N,)`` (the
        scheduler's: σ·1000 for the flow-matching models), ``(N, dim)``; the
        parameters as for :meth:`timestep`."""
        request = given(locals(), parameters)
        return self._send(_wire.timestep_positions(position_ids, request))

    def timestep_from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        max_len: int,
        start: int | None = None,
        stop: int | None = None,
        timestep_dtype: TimestepDType | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """A diffusers model's timestep embeddings ``(rows, width)`` from its
        ``config.json`` (its ``_class_name``: the UNets, FLUX, SD3, PixArt, Wan, ...), as
        :meth:`from_config` takes it."""
        request = given(locals(), parameters)
        return self._send(_wire.timestep_from_config(read_config(config), request))

    def sincos_2d(
        self,
        height: int,
        width: int,
        dim: int,
        *,
        preset: str | None = None,
        extra_tokens: int | None = None,
        base_size: int | None = None,
        interpolation_scale: float | None = None,
        pos_embed_max_size: int | None = None,
        temperature: float | None = None,
        interleave_sin_cos: bool | None = None,
        reverse_coord: bool | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """The 2-D sin-cos table of a ``height × width`` patch grid, ``(extra_tokens +
        height·width, dim)``, a row a token (row-major): a ``preset`` (``mae``, the default;
        ``diffusers``, ``sd3``, ``timm``) and the parameters it takes."""
        return self._send(_wire.sincos("2d", given(locals(), parameters)))

    def sincos_3d(
        self,
        frames: int,
        height: int,
        width: int,
        dim: int,
        *,
        preset: str | None = None,
        spatial_interpolation_scale: float | None = None,
        temporal_interpolation_scale: float | None = None,
        text_tokens: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """The 3-D sin-cos table of a ``frames × height × width`` patch grid, ``(text_tokens
        + frames·height·width, dim)`` (diffusers' ``get_3d_sincos_pos_embed``; ``preset=
        "cogvideox"``: CogVideoX-2b's)."""
        return self._send(_wire.sincos("3d", given(locals(), parameters)))

    def sincos_2d_from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        height: int | None = None,
        width: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """A diffusers model's 2-D sin-cos table from its ``config.json`` (SD3, PixArt,
        DiT, Latte) for a picture of ``height × width`` pixels (default the config's)."""
        request = given(locals(), parameters)
        return self._send(_wire.sincos_from_config("2d", read_config(config), request))

    def sincos_3d_from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        frames: int | None = None,
        height: int | None = None,
        width: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> Array:
        """CogVideoX's 3-D sin-cos table from its ``config.json`` for a video of ``frames``
        frames of ``height × width`` pixels (default the config's)."""
        request = given(locals(), parameters)
        return self._send(_wire.sincos_from_config("3d", read_config(config), request))

    def rope_nd(
        self,
        grid: Sequence[int] | str,
        *,
        preset: str | None = None,
        axes_dim: Sequence[int] | str | None = None,
        head_dim: int | None = None,
        theta: float | None = None,
        freqs_dtype: Literal["float32", "float64"] | None = None,
        text_tokens: int | None = None,
        ids_dtype: TimestepDType | None = None,
        layout: Literal["interleaved", "half"] | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """Multi-axis RoPE of a diffusion transformer, ``(cos, sin)`` each ``(tokens,
        head_dim)``: the latent ``grid`` in patches (``(H, W)``, ``(T, H, W)``), the text
        tokens first, as a ``preset`` (``flux``, ``flux2``, ``hunyuan-video``, ``wan``, ...)
        or diffusers' ``get_1d_rotary_pos_embed`` per axis computes them."""
        request = given(locals(), parameters)
        return self._send(_wire.rope_nd(request))

    def rope_nd_positions(
        self,
        position_ids: ArrayLike,
        *,
        grid: Sequence[int] | str,
        preset: str | None = None,
        axes_dim: Sequence[int] | str | None = None,
        theta: float | None = None,
        freqs_dtype: Literal["float32", "float64"] | None = None,
        ids_dtype: TimestepDType | None = None,
        layout: Literal["interleaved", "half"] | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """``(cos, sin)`` at ``position_ids`` ``(axes, L)``, every axis's (any finite numbers); the
        parameters as for :meth:`rope_nd` (``grid``: any of the preset's shape)."""
        request = given(locals(), parameters)
        return self._send(_wire.rope_nd_positions(position_ids, request))

    def rope_nd_apply(
        self,
        batch: ArrayLike,
        *,
        grid: Sequence[int] | str,
        preset: str | None = None,
        axes_dim: Sequence[int] | str | None = None,
        head_dim: int | None = None,
        theta: float | None = None,
        freqs_dtype: Literal["float32", "float64"] | None = None,
        text_tokens: int | None = None,
        ids_dtype: TimestepDType | None = None,
        layout: Literal["interleaved", "half"] | None = None,
        rounding: Rounding | None = None,
        arithmetic: Literal["float32", "float64"] | None = None,
        **parameters: Value,
    ) -> Array:
        """Queries or keys ``(B, heads, L, head_dim)`` rotated by the table of their ``L``
        tokens, as diffusers' ``apply_rotary_emb`` (``arithmetic="float64"``: Wan2.1's
        ``rope_apply``)."""
        request = given(locals(), parameters)
        return self._send(_wire.apply(_wire.ROPE_ND + "/apply", batch, None, request))

    def rope_nd_from_config(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
        *,
        height: int,
        width: int,
        frames: int | None = None,
        text_tokens: int | None = None,
        ids_dtype: TimestepDType | None = None,
        layout: Literal["interleaved", "half"] | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """A diffusers transformer's multi-axis RoPE ``(cos, sin)`` from its ``config.json``
        (FLUX, FLUX.2, Qwen-Image, HunyuanVideo, Wan) over an image or video of ``height``
        x ``width`` pixels (``frames``)."""
        request = given(locals(), parameters)
        return self._send(_wire.rope_nd_from_config(read_config(config), request))

    def vision_rotary(
        self,
        model: VisionModel,
        grid: Sequence[int] | str,
        *,
        head_dim: int | None = None,
        theta: float | None = None,
        spatial_merge_size: int | None = None,
        window_index: bool | None = None,
        window_size: int | None = None,
        patch_size: int | None = None,
        implementation: Literal["transformers", "original", "timm"] | None = None,
        normalize_coords: Literal["separate", "min", "max"] | None = None,
        periods_dtype: Literal["float32", "bfloat16"] | None = None,
        ref_feat_shape: Sequence[int] | str | None = None,
        grid_offset: float | None = None,
        start: int | None = None,
        stop: int | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """A vision tower's 2-D RoPE, ``(cos, sin)`` each ``(tokens, head_dim)``: one row a
        patch token of an image of ``grid`` patches (``(H, W)``, or ``(T, H, W)`` for
        Qwen-VL's frames) in the ``model``'s token order (``qwen2_vl``, ``qwen2_5_vl``,
        ``qwen3_vl``, ``pixtral``, ``llama4``, ``dinov3``, ``eva02``), in the layout its
        apply reads; the parameters its checkpoint's unless given."""
        request = given(locals(), parameters)
        return self._send(_wire.vision_rotary(request))

    def vision_rotary_positions(
        self,
        model: VisionModel,
        grid: Sequence[int] | str,
        coordinates: ArrayLike,
        *,
        head_dim: int | None = None,
        theta: float | None = None,
        spatial_merge_size: int | None = None,
        implementation: Literal["transformers", "original", "timm"] | None = None,
        normalize_coords: Literal["separate", "min", "max"] | None = None,
        periods_dtype: Literal["float32", "bfloat16"] | None = None,
        ref_feat_shape: Sequence[int] | str | None = None,
        grid_offset: float | None = None,
        rounding: Rounding | None = None,
        dtype: DType | None = None,
        **parameters: Value,
    ) -> tuple[Array, Array]:
        """``(cos, sin)`` at patch ``coordinates`` (integers: rows then columns ``(2, L)``,
        or one ``(row, column)`` a token, ``(L, 2)``), each ``(L, head_dim)``; the
        parameters as for :meth:`vision_rotary`."""
        request = given(locals(), parameters)
        return self._send(_wire.vision_rotary_positions(coordinates, request))

    def vision_rotary_apply(
        self,
        batch: ArrayLike,
        model: VisionModel,
        grid: Sequence[int] | str,
        *,
        head_dim: int | None = None,
        theta: float | None = None,
        spatial_merge_size: int | None = None,
        window_index: bool | None = None,
        window_size: int | None = None,
        patch_size: int | None = None,
        implementation: Literal["transformers", "original", "timm"] | None = None,
        normalize_coords: Literal["separate", "min", "max"] | None = None,
        periods_dtype: Literal["float32", "bfloat16"] | None = None,
        ref_feat_shape: Sequence[int] | str | None = None,
        grid_offset: float | None = None,
        rounding: Rounding | None = None,
        **parameters: Value,
    ) -> Array:
        """Queries or keys ``(B, heads, L, head_dim)`` rotated by the table of the image's
        first ``L`` tokens as the ``model``'s apply does (float32; rotate-half for Qwen-VL,
        Pixtral and DINOv3, interleaved pairs for Llama 4 and EVA-02); ``head_dim`` the
        batch's unless given."""
        request = given(locals(), parameters)
        return self._send(_wire.apply(_wire.VISION_ROTARY + "/apply", batch, None, request))

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
        return self._send(_wire.compare(comparison_table(a), comparison_table(b), start, stop))

    def verify(
        self,
        table: PostedTable,
        family: Family | None = None,
        *,
        config: Mapping[str, Any] | str | os.PathLike[str] | bytes | None = None,
        start: int = 0,
        position_ids: ArrayLike | None = None,
        **parameters: Value,
    ) -> dict[str, Any]:
        """Whether ``table`` is what ``family``'s ``GET`` with ``parameters`` (or the model's
        ``config``, as :meth:`from_config` takes it, with from-config's ``parameters``; its
        family ``rotary`` unless named) gives at positions ``start``, ``start + 1``, ...
        (or at ``position_ids``, one a row), and if not, which known mistake makes it
        (``POST /v1/verify``). ``table``: an array ``(L, d)``, rotary's ``(2, L, d)`` (cos
        first), or ``{"cos": ..., "sin": ...}``. The answer: ``{"match": "bitwise" |
        "library" | "float16" | "bfloat16" | "different", "claim", "rows", "bands",
        "first_over", "first_wrong_way", "non_finite", "diagnoses": [{"mistake",
        "description", "from_position", "max_error", "family", "parameters", "by"}]}``."""
        claim: dict[str, Any] = {"family": family, "parameters": parameters}
        if config is not None:
            claim = {**claim, "family": family or "rotary", "config": read_config(config)}
        return self._send(_wire.verify(table, claim, start, position_ids))

    def identify(
        self, table: PostedTable, *, start: int = 0, position_ids: ArrayLike | None = None
    ) -> dict[str, Any]:
        """The ``GET`` requests that reproduce ``table`` (taken as :meth:`verify` takes it),
        best first, with no claim (``POST /v1/identify``): ``{"matched", "tried",
        "candidates": [{"family", "parameters", "match", "max_error", "bands",
        "first_over"}], "read": {"rows", "width", "pairing", "base",
        "attention_factor"}}``."""
        return self._send(_wire.identify(table, start, position_ids))

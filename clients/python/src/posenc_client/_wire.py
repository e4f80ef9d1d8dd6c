"""What the sync and async clients share: the requests (:class:`Call`, built by the
functions below: a path, a query, a body, and how the answer is read, with the pieces of
:mod:`posenc_client._encoding`). Nothing here does I/O."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import httpx
import numpy as np
from numpy.typing import ArrayLike

from posenc_client._encoding import (
    JSON,
    NPY,
    NPZ,
    PNG,
    Array,
    Config,
    PostedTable,
    RotaryLayers,
    Value,
    array_of,
    column_of,
    content_of,
    cos_sin_of,
    document_of,
    members_of,
    names_of,
    pair_of,
    query,
    tables_of,
    write_config,
    write_members,
    write_npy,
    write_npz,
)

T = TypeVar("T")
SINUSOIDAL: Final = "/v1/encodings/sinusoidal"
ROTARY: Final = "/v1/encodings/rotary"
FROM_CONFIG: Final = ROTARY + "/from-config"
POSITIONS: Final = ROTARY + "/positions"
TEMPERATURE: Final = "/v1/encodings/temperature"
TIMESTEP: Final = "/v1/encodings/timestep"
SINCOS: Final = "/v1/encodings/sincos-"
ROPE_ND: Final = "/v1/encodings/rope-nd"
VISION_ROTARY: Final = "/v1/encodings/vision-rotary"
MROPE: Final = "/v1/positions/mrope"
ALIBI: Final = "/v1/biases/alibi"
AUDIT: Final = "/v1/audit"
COMPARE: Final = "/v1/compare"
VERIFY: Final = "/v1/verify"
IDENTIFY: Final = "/v1/identify"
# the arrays a posted table may hold, by the names the service reads them under
TABLE_MEMBERS: Final = ("cos", "sin", "data")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request, and how its answer becomes a result."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    headers: dict[str, str] | None = None


def table(family: str, given: Mapping[str, Value]) -> Call[Array]:
    """``GET /v1/encodings/{family}`` as ``.npy``: any family's table by its parameters."""
    return Call("GET", f"/v1/encodings/{family}", array_of, query({**given, "format": "npy"}))


def rotary(given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    return Call("GET", ROTARY, pair_of, query({**given, "format": "npy"}))


def from_config(config: Config, given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    """``POST /v1/encodings/rotary/from-config`` with a model's ``config.json``; the
    ``given`` parameters (rows, convention, rounding, dtype) override the config's; the
    answer as ``.npz``."""
    params = query({**given, "format": "npz"})
    return Call(
        "POST", FROM_CONFIG, cos_sin_of, params, write_config(config), {"content-type": JSON}
    )


def rotary_layers(config: Config, given: Mapping[str, Value]) -> Call[RotaryLayers]:
    """``POST /v1/encodings/rotary/from-config`` as ``.npz``, each table of the answer (one
    per layer type where the config's rope parameters are per layer type) by its name, with
    the ``X-Layer-Types`` and ``X-Config-Fields`` the answer says."""
    asked = given.get("layer_type")
    one = asked if isinstance(asked, str) else ""

    def decode(response: httpx.Response) -> RotaryLayers:
        tables = tables_of(members_of(response), one)
        fields = names_of(response.headers.get("x-config-fields")) or []
        layers = names_of(response.headers.get("x-layer-types"))
        return {"tables": tables, "layer_types": layers, "config_fields": fields}

    params = query({**given, "format": "npz"})
    return Call("POST", FROM_CONFIG, decode, params, write_config(config), {"content-type": JSON})


def rotary_positions(
    position_ids: ArrayLike, given: Mapping[str, Value]
) -> Call[tuple[Array, Array]]:
    """``POST /v1/encodings/rotary/positions`` with the ids as an ``.npy`` (integers as
    int64; anything else as it is, for the service to refuse); the answer as ``.npz``."""
    ids = np.asarray(position_ids)
    if ids.dtype.kind in "iu":
        ids = ids.astype(np.int64, copy=False)
    params = query({**given, "format": "npz"})
    return Call("POST", POSITIONS, cos_sin_of, params, write_npy(ids), {"content-type": NPY})


def _plain(value: Any) -> Any:
    """A NumPy (or torch) number or array in a JSON body, as its ``tolist()``."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def mrope_positions(
    segments: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]
) -> Call[tuple[Array, int]]:
    """``POST /v1/positions/mrope`` with the layout as JSON (a setting that is ``None`` is
    not sent: the config's, else the service's default); the ``(3, L)`` int64 ids as
    ``.npy`` and the rope delta of its ``X-Rope-Delta``."""
    body: dict[str, Any] = {"segments": [dict(segment) for segment in segments]}
    for name, value in settings.items():
        if value is not None:
            body[name] = json.loads(value) if isinstance(value, bytes) else value
    content = json.dumps(body, allow_nan=False, default=_plain).encode()

    def decode(response: httpx.Response) -> tuple[Array, int]:
        ids = array_of(response)
        delta = response.headers.get("x-rope-delta")
        if delta is None:
            raise ValueError("the answer has no X-Rope-Delta")
        return ids, int(delta)

    return Call("POST", MROPE, decode, {"format": "npy"}, content, {"content-type": JSON})


def temperature(given: Mapping[str, Value]) -> Call[Array]:
    return Call("GET", TEMPERATURE, column_of, query({**given, "format": "npy"}))


def temperature_from_config(
    config: Config, given: Mapping[str, Value]
) -> Call[tuple[Array, list[str] | None]]:
    """``POST /v1/encodings/temperature/from-config`` with a Llama 4 ``config.json``: the
    scales ``(rows,)`` and the kind of each layer its ``X-Layer-Types`` says (``rope``, or
    ``nope``: the layers the scales are for), ``None`` when it says none."""

    def decode(response: httpx.Response) -> tuple[Array, list[str] | None]:
        return column_of(response), names_of(response.headers.get("x-layer-types"))

    params = query({**given, "format": "npy"})
    path = TEMPERATURE + "/from-config"
    return Call("POST", path, decode, params, write_config(config), {"content-type": JSON})


def timestep(given: Mapping[str, Value]) -> Call[Array]:
    return Call("GET", TIMESTEP, array_of, query({**given, "format": "npy"}))


def timestep_positions(position_ids: ArrayLike, given: Mapping[str, Value]) -> Call[Array]:
    """``POST /v1/encodings/timestep/positions`` with the timesteps as an ``.npy`` (any
    finite numbers; integers as float64), ``max_len`` 1 unless given (the table's, unused
    at posted timesteps)."""
    ids = np.asarray(position_ids)
    if ids.dtype.kind in "iu":
        ids = ids.astype(np.float64)
    params = query({"max_len": 1, **given, "format": "npy"})
    path = TIMESTEP + "/positions"
    return Call("POST", path, array_of, params, write_npy(ids), {"content-type": NPY})


def timestep_from_config(config: Config, given: Mapping[str, Value]) -> Call[Array]:
    """``POST /v1/encodings/timestep/from-config`` with a diffusers model's ``config.json``."""
    params = query({**given, "format": "npy"})
    path = TIMESTEP + "/from-config"
    return Call("POST", path, array_of, params, write_config(config), {"content-type": JSON})


def sincos(axes: str, given: Mapping[str, Value]) -> Call[Array]:
    """``GET /v1/encodings/sincos-2d`` (``axes`` "2d") or ``sincos-3d``."""
    return Call("GET", SINCOS + axes, array_of, query({**given, "format": "npy"}))


def sincos_from_config(axes: str, config: Config, given: Mapping[str, Value]) -> Call[Array]:
    """``POST /v1/encodings/sincos-2d/from-config`` (or ``3d``) with a diffusers model's
    ``config.json``."""
    params = query({**given, "format": "npy"})
    path = SINCOS + axes + "/from-config"
    return Call("POST", path, array_of, params, write_config(config), {"content-type": JSON})


def rope_nd(given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    """``GET /v1/encodings/rope-nd`` as ``.npz``: ``(cos, sin)``."""
    return Call("GET", ROPE_ND, cos_sin_of, query({**given, "format": "npz"}))


def rope_nd_positions(ids: ArrayLike, given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    """``POST /v1/encodings/rope-nd/positions`` with the ids ``(axes, L)`` as an ``.npy``
    (any finite numbers; integers as float64); the answer as ``.npz``."""
    values = np.asarray(ids)
    if values.dtype.kind in "iu":
        values = values.astype(np.float64)
    params = query({**given, "format": "npz"})
    path = ROPE_ND + "/positions"
    return Call("POST", path, cos_sin_of, params, write_npy(values), {"content-type": NPY})


def rope_nd_from_config(config: Config, given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    """``POST /v1/encodings/rope-nd/from-config`` with a diffusers transformer's
    ``config.json``; the answer as ``.npz``."""
    params = query({**given, "format": "npz"})
    path = ROPE_ND + "/from-config"
    return Call("POST", path, cos_sin_of, params, write_config(config), {"content-type": JSON})


def vision_rotary(given: Mapping[str, Value]) -> Call[tuple[Array, Array]]:
    """``GET /v1/encodings/vision-rotary`` as ``.npz``: ``(cos, sin)``."""
    return Call("GET", VISION_ROTARY, cos_sin_of, query({**given, "format": "npz"}))


def vision_rotary_positions(
    coordinates: ArrayLike, given: Mapping[str, Value]
) -> Call[tuple[Array, Array]]:
    """``POST /v1/encodings/vision-rotary/positions`` with the patch coordinates ``(2, L)``
    or ``(L, 2)`` as an ``.npy`` (integers as int64; anything else as it is, for the service
    to refuse); the answer as ``.npz``."""
    ids = np.asarray(coordinates)
    if ids.dtype.kind in "iu":
        ids = ids.astype(np.int64, copy=False)
    params = query({**given, "format": "npz"})
    path = VISION_ROTARY + "/positions"
    return Call("POST", path, cos_sin_of, params, write_npy(ids), {"content-type": NPY})


def apply(
    path: str, batch: ArrayLike, position_ids: ArrayLike | None, given: Mapping[str, Value]
) -> Call[Array]:
    """``POST {path}`` with ``batch`` as ``.npy``, or as ``.npz`` with its ``position_ids``;
    the answer as ``.npy``."""
    if position_ids is None:
        content, kind = write_npy(batch), NPY
    else:
        content, kind = write_npz(batch, position_ids), NPZ
    params = query({**given, "format": "npy"})
    return Call("POST", path, array_of, params, content, {"content-type": kind})


def slopes(given: Mapping[str, Value]) -> Call[Array]:
    return Call("GET", ALIBI + "/slopes", array_of, query({**given, "format": "npy"}))


def bias(given: Mapping[str, Value]) -> Call[Array]:
    return Call("GET", ALIBI, array_of, query({**given, "format": "npy"}))


def _audit(
    given: Mapping[str, Value], paths: Sequence[str] | str | None, fmt: str
) -> dict[str, str]:
    """An audit's query string: the table's parameters, the ``paths`` (names, or the text
    ``"a,b"``) comma-separated, and the format."""
    names = paths if paths is None or isinstance(paths, str) else ",".join(paths)
    return query({**given, "paths": names, "format": fmt})


def audit(
    family: str, given: Mapping[str, Value], paths: Sequence[str] | str | None
) -> Call[dict[str, Any]]:
    """``GET /v1/audit/{family}`` as JSON: how far each computation path's table is from
    the exact one, by position band."""

    def decode(response: httpx.Response) -> dict[str, Any]:
        document: dict[str, Any] = document_of(response)
        return document

    return Call("GET", f"{AUDIT}/{family}", decode, _audit(given, paths, "json"))


def audit_png(
    family: str, given: Mapping[str, Value], paths: Sequence[str] | str | None
) -> Call[bytes]:
    """``GET /v1/audit/{family}`` as a PNG: error against position, log-log."""
    params = _audit(given, paths, "png")
    return Call("GET", f"{AUDIT}/{family}", lambda r: content_of(r, PNG), params)


def _side(name: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """One table of a comparison as the body says it: its ``config`` parsed where it is
    bytes; ``parameters`` left ``None`` not sent (the config's, else the service's
    default), a list (longrope's factors) as the query string says it, ``0.5,0.5``."""
    if not isinstance(table, Mapping):
        raise TypeError(f"{name} must be a dict, got {type(table).__name__}")
    side = {key: value for key, value in table.items() if value is not None}
    config = side.get("config")
    if isinstance(config, bytes):
        side["config"] = json.loads(config)
    elif isinstance(config, Mapping):
        side["config"] = dict(config)
    parameters: Mapping[str, Any] = side.get("parameters") or {}
    side["parameters"] = {
        key: query({key: value})[key]
        if isinstance(value, Sequence) and not isinstance(value, str)
        else value
        for key, value in parameters.items()
        if value is not None
    }
    return side


def compare(
    a: Mapping[str, Any], b: Mapping[str, Any], start: int, stop: int
) -> Call[dict[str, Any]]:
    """``POST /v1/compare``: tables ``a`` and ``b`` (``{"family", "parameters"}``, or
    ``{"family", "config", "parameters"}``) over positions ``start .. stop-1``."""
    body = {"a": _side("a", a), "b": _side("b", b), "start": start, "stop": stop}
    content = json.dumps(body, allow_nan=False, default=_plain).encode()

    def decode(response: httpx.Response) -> dict[str, Any]:
        document: dict[str, Any] = document_of(response)
        return document

    return Call("POST", COMPARE, decode, {}, content, {"content-type": JSON})


def _members(table: PostedTable, position_ids: ArrayLike | None) -> dict[str, Array]:
    """A posted table's arrays by name, and its position ids (integers as int64)."""
    if isinstance(table, Mapping):
        unknown = [name for name in table if name not in TABLE_MEMBERS]
        if unknown:
            raise TypeError(f"table: {unknown[0]!r} is not cos, sin or data")
        members = {name: np.asarray(array) for name, array in table.items()}
    else:
        members = {"data": np.asarray(table)}
    if position_ids is not None:
        ids = np.asarray(position_ids)
        members["position_ids"] = ids.astype(np.int64) if ids.dtype.kind in "iu" else ids
    return members


def _judged(response: httpx.Response) -> dict[str, Any]:
    document: dict[str, Any] = document_of(response)
    return document


def _posted(path: str, members: Mapping[str, Array], params: dict[str, str]) -> Call[Any]:
    """``POST {path}`` with the table's arrays as an ``.npz``; the answer as JSON."""
    headers = {"content-type": NPZ}
    return Call("POST", path, _judged, params, write_members(members), headers)


def verify(
    table: PostedTable,
    claim: Mapping[str, Any],
    start: int,
    position_ids: ArrayLike | None,
) -> Call[dict[str, Any]]:
    """``POST /v1/verify``: the table against the ``claim`` (``{"family", "parameters"}``,
    or ``{"family", "config", "parameters"}``). Without a config the table goes as an
    ``.npz`` and the claim in the query; with one, all as a JSON document (the arrays as
    lists, their ``dtype`` beside them: a float's list is its exact value, which the service
    rounds back to that dtype bit for bit)."""
    members = _members(table, position_ids)
    if claim.get("config") is None:
        given = {"family": claim.get("family"), **claim.get("parameters", {}), "start": start}
        return _posted(VERIFY, members, query(given))
    body: dict[str, Any] = {**_side("claim", claim), "start": start}
    dtypes = [str(array.dtype) for name, array in members.items() if name != "position_ids"]
    if dtypes:
        body["dtype"] = dtypes[0]
    body.update({name: array.tolist() for name, array in members.items()})
    try:
        content = json.dumps(body, allow_nan=False).encode()
    except ValueError:
        raise ValueError(
            "table: a non-finite entry has no JSON form; post it without a config "
            "(family and parameters), which sends the table as .npz"
        ) from None
    return Call("POST", VERIFY, _judged, {}, content, {"content-type": JSON})


def identify(
    table: PostedTable, start: int, position_ids: ArrayLike | None
) -> Call[dict[str, Any]]:
    """``POST /v1/identify``: the table as an ``.npz``, no claim; the answer as JSON."""
    return _posted(IDENTIFY, _members(table, position_ids), query({"start": start}))


def given(names: Mapping[str, Any], parameters: Mapping[str, Value]) -> dict[str, Value]:
    """A method's parameters from its ``locals()`` and its other keyword arguments."""
    skip = ("self", "config", "batch", "position_ids", "coordinates", "parameters")
    return {**{k: v for k, v in names.items() if k not in skip}, **parameters}


def presets(family: str | None = None) -> Call[list[dict[str, Any]]]:
    def decode(response: httpx.Response) -> list[dict[str, Any]]:
        document = document_of(response)
        if family is None or family == "sinusoidal":
            return list(document["presets"])
        listed: list[dict[str, Any]] = document["families"].get(family, [])
        return listed

    return Call("GET", "/v1/presets", decode)


def cache_stats() -> Call[dict[str, Any]]:
    def decode(response: httpx.Response) -> dict[str, Any]:
        stats: dict[str, Any] = document_of(response)
        return stats

    return Call("GET", "/v1/cache", decode)


def ready() -> Call[bool]:
    return Call("GET", "/readyz", lambda response: response.status_code == 200)

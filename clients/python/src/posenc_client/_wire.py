"""What the sync and async clients share: the requests (:class:`Call`, built by the
functions below), the ``.npy`` and ``.npz`` bodies, and the decoding of answers. Nothing
here does I/O."""

from __future__ import annotations

import io
import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypedDict, TypeVar

import httpx
import numpy as np
from numpy.typing import ArrayLike, NDArray

T = TypeVar("T")
Array = NDArray[Any]
DType = Literal["float32", "float64", "float16"]
Rounding = Literal["library", "exact"]
Layout = Literal["interleaved", "split"]
Convention = Literal["half", "interleaved"]
Scaling = Literal["none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3"]
Form = Literal["causal", "bloom", "symmetric"]
Mrope = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl"]
# the families an audit covers (``GET /v1/audit/{family}``) and a comparison takes
Family = Literal["rotary", "sinusoidal", "temperature", "alibi"]
# a query parameter's value: numbers, words, booleans, or numbers separated by commas
Value = int | float | str | bool | Sequence[float] | None
# a model's config.json, parsed or as its bytes (the clients also take a path and read it)
Config = Mapping[str, Any] | bytes

NPY: Final = "application/x-npy"
NPZ: Final = "application/x-npz"
JSON: Final = "application/json"
PNG: Final = "image/png"
SINUSOIDAL: Final = "/v1/encodings/sinusoidal"
ROTARY: Final = "/v1/encodings/rotary"
FROM_CONFIG: Final = ROTARY + "/from-config"
POSITIONS: Final = ROTARY + "/positions"
TEMPERATURE: Final = "/v1/encodings/temperature"
MROPE: Final = "/v1/positions/mrope"
ALIBI: Final = "/v1/biases/alibi"
AUDIT: Final = "/v1/audit"
COMPARE: Final = "/v1/compare"
# parameters that are lists of integers (M-RoPE's pairs per axis, ``16,24,24``; an audit's
# band edges, ``100,3000``)
INTEGER_LISTS: Final = frozenset({"mrope_section", "bands"})


class RotaryLayers(TypedDict):
    """A model's rotary tables by layer type (:meth:`~posenc_client.Client.rotary_layers`):
    ``tables`` maps each type's name to its ``(cos, sin)`` (one table, a config with one set
    of rope parameters, is under ``""``, or under the ``layer_type`` asked for);
    ``layer_types`` is the type of each layer, in order (``None`` when the config has none);
    ``config_fields`` the config's fields the service read."""

    tables: dict[str, tuple[Array, Array]]
    layer_types: list[str] | None
    config_fields: list[str]


class ProblemError(Exception):
    """The service answered with an error; ``problem`` is its RFC 9457 document (or one
    made from the status line, when an answer from elsewhere, say a proxy, is not one)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        super().__init__(f"{status} {self.title}: {self.detail}")


def write_npy(array: ArrayLike) -> bytes:
    """``array`` as an ``.npy`` file (NumPy's own writer; never pickled)."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def read_npy(data: bytes) -> Array:
    """The array in an ``.npy`` file (NumPy's own reader; a pickled array is refused). The
    result is writeable and owns its memory."""
    array: Array = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    return array


def write_npz(embeddings: ArrayLike, position_ids: ArrayLike) -> bytes:
    """A batch and its position ids as an uncompressed ``.npz`` archive, a member each."""
    buffer = io.BytesIO()
    np.savez(buffer, embeddings=np.asarray(embeddings), position_ids=np.asarray(position_ids))
    return buffer.getvalue()


def read_npz(data: bytes) -> dict[str, Array]:
    """The members of an ``.npz`` archive by name (NumPy's own reader; pickles refused)."""
    with np.lib.npyio.NpzFile(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def write_config(config: Config) -> bytes:
    """A model's ``config.json`` as the body to post: bytes as they are, a mapping as JSON
    (NaN and the infinities refused here: JSON has no word for them)."""
    if isinstance(config, bytes):
        return config
    return json.dumps(dict(config), allow_nan=False).encode()


def wire(value: int | float | str | bool | Sequence[float]) -> str:
    """A parameter's value as the query string says it: floats in full (``repr``),
    booleans in lower case, sequences (longrope's factors) joined by commas."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int | str):
        return str(value)
    return ",".join(wire(float(item)) for item in value)


def integers(values: Sequence[float]) -> str:
    """A list of integers as the query string says it, ``16,24,24`` (not ``16.0,...``); any
    other number as :func:`wire` says it, for the service to refuse."""
    return ",".join(str(int(n)) if float(n).is_integer() else wire(float(n)) for n in values)


def query(given: Mapping[str, Value]) -> dict[str, str]:
    """The query string of the ``given`` parameters; ``None`` means the service's default."""
    return {
        name: integers(value)
        if name in INTEGER_LISTS and isinstance(value, Sequence) and not isinstance(value, str)
        else wire(value)
        for name, value in given.items()
        if value is not None
    }


def names_of(header: str | None) -> list[str] | None:
    """A header's comma-separated list of names (``X-Layer-Types``, ``X-Config-Fields``),
    each percent-decoded; ``None`` when the answer has no such header."""
    if header is None:
        return None
    return [urllib.parse.unquote(name.strip()) for name in header.split(",") if name.strip()]


def problem_of(response: httpx.Response) -> ProblemError:
    """The error an answer with an error status stands for."""
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        problem = {
            "title": response.reason_phrase,
            "status": response.status_code,
            "detail": response.text[:1000],
        }
    return ProblemError(response.status_code, problem)


def content_of(response: httpx.Response, expected: str) -> bytes:
    """The body of a successful answer of media type ``expected``; an error answer raises
    :class:`ProblemError`, a success of another type :class:`ValueError`."""
    if response.status_code >= 400:
        raise problem_of(response)
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    if kind != expected:
        suffix = {NPY: ".npy", NPZ: ".npz", PNG: ".png"}.get(expected, expected)
        raise ValueError(
            f"expected an {suffix} answer ({expected}), got {kind or 'no content type'}"
        )
    return response.content


def array_of(response: httpx.Response) -> Array:
    """The ``.npy`` array of a successful answer, else :class:`ProblemError`."""
    return read_npy(content_of(response, NPY))


def members_of(response: httpx.Response) -> dict[str, Array]:
    """The ``.npz`` members of a successful answer by name, else :class:`ProblemError`."""
    return read_npz(content_of(response, NPZ))


def cos_sin_of(response: httpx.Response) -> tuple[Array, Array]:
    """A rotary table's ``.npz`` answer (members ``cos`` and ``sin``) as ``(cos, sin)``."""
    members = members_of(response)
    if "cos" not in members or "sin" not in members:
        hint = ""
        if any("/" in name for name in members):
            hint = " (a table per layer type: give layer_type, or call rotary_layers)"
        raise ValueError(f"expected members cos and sin, got {', '.join(members)}{hint}")
    return members["cos"], members["sin"]


def tables_of(members: Mapping[str, Array], one: str = "") -> dict[str, tuple[Array, Array]]:
    """The ``(cos, sin)`` of each table of an ``.npz`` answer: members ``NAME/cos`` and
    ``NAME/sin`` by ``NAME``; a single table's ``cos`` and ``sin`` under ``one``."""
    grouped: dict[str, dict[str, Array]] = {}
    for name, array in members.items():
        table, _, member = name.rpartition("/")
        grouped.setdefault(table or one, {})[member] = array
    missing = [name for name, named in grouped.items() if not {"cos", "sin"} <= named.keys()]
    if missing or not grouped:
        raise ValueError(f"expected members cos and sin of each table, got {', '.join(members)}")
    return {name: (named["cos"], named["sin"]) for name, named in grouped.items()}


def column_of(response: httpx.Response) -> Array:
    """A one-column table's ``.npy`` answer, ``(rows, 1)``, as ``(rows,)``."""
    return array_of(response).reshape(-1)


def pair_of(response: httpx.Response) -> tuple[Array, Array]:
    """A rotary table's ``(2, rows, rotary_dim)`` answer as ``(cos, sin)``."""
    stacked = array_of(response)
    return stacked[0], stacked[1]


def document_of(response: httpx.Response) -> Any:
    """The JSON document of a successful answer, else :class:`ProblemError`."""
    if response.status_code >= 400:
        raise problem_of(response)
    return response.json()


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


def given(names: Mapping[str, Any], parameters: Mapping[str, Value]) -> dict[str, Value]:
    """A method's parameters from its ``locals()`` and its other keyword arguments."""
    skip = ("self", "config", "batch", "position_ids", "parameters")
    return {**{k: v for k, v in names.items() if k not in skip}, **parameters}


def presets() -> Call[list[dict[str, Any]]]:
    def decode(response: httpx.Response) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = document_of(response)["presets"]
        return listed

    return Call("GET", "/v1/presets", decode)


def cache_stats() -> Call[dict[str, Any]]:
    def decode(response: httpx.Response) -> dict[str, Any]:
        stats: dict[str, Any] = document_of(response)
        return stats

    return Call("GET", "/v1/cache", decode)


def ready() -> Call[bool]:
    return Call("GET", "/readyz", lambda response: response.status_code == 200)

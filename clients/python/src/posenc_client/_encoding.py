"""The wire's pieces: the types of values, the media types, ``.npy`` and ``.npz`` made
and read, query values written, and answers read (problems raised). The calls that use them
are :mod:`posenc_client._wire`'s."""

from __future__ import annotations

import io
import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypedDict

import httpx
import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[Any]
DType = Literal["float32", "float64", "float16"]
Rounding = Literal["library", "exact"]
TimestepDType = Literal["float32", "bfloat16", "float16"]
Layout = Literal["interleaved", "split"]
Convention = Literal["half", "interleaved"]
Scaling = Literal["none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3"]
Form = Literal["causal", "bloom", "symmetric"]
Mrope = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl"]
# a vision tower whose 2-D RoPE the service serves (``GET /v1/encodings/vision-rotary``)
VisionModel = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "pixtral", "llama4", "dinov3", "eva02"]
# a family's name as the service's paths say it (``GET /v1/audit/{family}``, a comparison's
# tables): "rotary", "sinusoidal", "temperature", "alibi", or any other the service lists
# (its OpenAPI document), so a family added to the service needs no new client
Family = str
# a query parameter's value: numbers, words, booleans, or numbers separated by commas
Value = int | float | str | bool | Sequence[float] | None
# a posted table (verify, identify): one array, ``(L, d)`` or rotary's ``(2, L, d)`` (cos
# first), or its arrays by name, ``{"cos": ..., "sin": ...}`` or ``{"data": ...}``
PostedTable = ArrayLike | Mapping[str, ArrayLike]
# a model's config.json, parsed or as its bytes (the clients also take a path and read it)
Config = Mapping[str, Any] | bytes

NPY: Final = "application/x-npy"
NPZ: Final = "application/x-npz"
JSON: Final = "application/json"
PNG: Final = "image/png"
# parameters that are lists of integers (M-RoPE's pairs per axis, ``16,24,24``; an audit's
# band edges, ``100,3000``; EVA-02's pre-training grid, ``16,16``)
INTEGER_LISTS: Final = frozenset({"mrope_section", "bands", "grid", "axes_dim", "ref_feat_shape"})


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


def write_members(members: Mapping[str, ArrayLike]) -> bytes:
    """Named arrays as an uncompressed ``.npz`` archive, a member each."""
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {name: np.asarray(array) for name, array in members.items()}
    np.savez(buffer, **arrays)
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


def read_config(
    config: Mapping[str, Any] | str | os.PathLike[str] | bytes,
) -> Mapping[str, Any] | bytes:
    """A ``config.json`` as given, or the bytes of the file at its path: a config.json is a
    few KiB, read where it is asked for, as httpx reads a file body."""
    return Path(config).read_bytes() if isinstance(config, str | os.PathLike) else config


def comparison_table(table: Mapping[str, Any]) -> Mapping[str, Any]:
    """One table of a comparison, its ``config`` read where it is a path."""
    config = table.get("config") if isinstance(table, Mapping) else None
    return table if config is None else {**table, "config": read_config(config)}

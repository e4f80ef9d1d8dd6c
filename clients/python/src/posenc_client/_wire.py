"""What the sync and async clients share: the requests (:class:`Call`, built by the
functions below), the ``.npy`` and ``.npz`` bodies, and the decoding of answers. Nothing
here does I/O."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar

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
# a query parameter's value: numbers, words, booleans, or numbers separated by commas
Value = int | float | str | bool | Sequence[float] | None
# a model's config.json, parsed or as its bytes (the clients also take a path and read it)
Config = Mapping[str, Any] | bytes

NPY: Final = "application/x-npy"
NPZ: Final = "application/x-npz"
JSON: Final = "application/json"
SINUSOIDAL: Final = "/v1/encodings/sinusoidal"
ROTARY: Final = "/v1/encodings/rotary"
FROM_CONFIG: Final = ROTARY + "/from-config"
ALIBI: Final = "/v1/biases/alibi"


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


def query(given: Mapping[str, Value]) -> dict[str, str]:
    """The query string of the ``given`` parameters; ``None`` means the service's default."""
    return {name: wire(value) for name, value in given.items() if value is not None}


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
        suffix = {NPY: ".npy", NPZ: ".npz"}.get(expected, expected)
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
    return members["cos"], members["sin"]


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

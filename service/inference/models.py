"""The models served over the Open Inference Protocol, transport-free: each one's metadata
and its run on a parsed request. The parameters are the v1 endpoints' own query models, so
a model takes the same names, defaults and checks as the endpoint it mirrors; the work is
the shared pipelines' (``handlers``). A gRPC front would parse its messages into the same
:class:`wire.Request` and call :func:`infer_parsed`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ValidationError

from service import __version__, batches
from service.codecs.types import Format, Headers
from service.encodings.additive import Additive
from service.encodings.rotation import Rotation
from service.errors import InvalidInput, InvalidParameter, ServiceError
from service.inference import wire
from service.runtime import Runtime
from service.schemas.rotary import RotaryApplyQuery
from service.schemas.sinusoidal import ApplyQuery, BlockQuery
from service.text import shown

SERVER: Final = {"name": "positional-encodings", "version": __version__}
EXTENSIONS: Final = ["binary_tensor_data"]
VERSION: Final = "1"
FLOATS: Final = ("FP32", "FP16", "FP64")
INTEGERS: Final = ("INT64", "INT32")


class UnknownModel(ServiceError):
    """No model of that name (or version) is served."""

    status = 404
    title = "Not Found"
    slug = "unknown-model"


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An input or output: its name, the datatypes it takes (the first is the default),
    its shape (-1 for a dimension that varies), and whether a request may leave it out."""

    name: str
    datatypes: tuple[str, ...]
    shape: tuple[int, ...]
    optional: bool = False

    def document(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "datatype": self.datatypes[0]}
        entry["shape"] = list(self.shape)
        if len(self.datatypes) > 1 or self.optional:
            entry["parameters"] = {"datatypes": list(self.datatypes), "optional": self.optional}
        return entry


Run = Callable[["Model", Runtime, wire.Request, bool], list[wire.Tensor]]


@dataclass(frozen=True, slots=True)
class Model:
    """A model: its tensors, its parameters (a v1 query model, less ``fixed`` names that
    the request's tensors decide) and its run."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    query: type[BaseModel]
    fixed: frozenset[str]
    run: Run

    @property
    def parameters(self) -> list[str]:
        return [name for name in self.query.model_fields if name not in self.fixed]

    def document(self) -> dict[str, Any]:
        """The model's metadata, as ``GET /v2/models/{name}`` answers it."""
        return {
            "name": self.name,
            "versions": [VERSION],
            "platform": SERVER["name"],
            "inputs": [spec.document() for spec in self.inputs],
            "outputs": [spec.document() for spec in self.outputs],
            "parameters": {"request": self.parameters},
        }


def _validated(model: Model, parameters: Mapping[str, Any], **given: Any) -> Any:
    """The request's parameters checked by the model's query model, as an instance."""
    for name in parameters:
        if name not in model.parameters:
            raise InvalidParameter(
                shown(name), f"is not a parameter of {model.name} ({', '.join(model.parameters)})"
            )
    try:
        # strictly: the protocol's parameters are typed (a boolean is not a number, nor
        # a string one), as a query string's are not
        return model.query.model_validate({**parameters, **given}, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ".".join(str(part) for part in error["loc"]) or "parameters"
        raise InvalidParameter(name, error["msg"]) from None


def _tensor(model: Model, request: wire.Request, name: str) -> NDArray[Any] | None:
    spec = next(spec for spec in model.inputs if spec.name == name)
    tensor = request.inputs.get(name)
    if tensor is None:
        if spec.optional:
            return None
        raise InvalidInput(name, f"is a required input of {model.name}")
    if tensor.datatype not in spec.datatypes:
        raise InvalidInput(
            name, f"is {tensor.datatype}; {model.name} takes {' or '.join(spec.datatypes)}"
        )
    return tensor.array


def _encodings(
    model: Model, runtime: Runtime, request: wire.Request, json_output: bool
) -> list[wire.Tensor]:
    """The rows of a sinusoidal table at the given positions."""
    positions = _tensor(model, request, "positions")
    assert positions is not None
    if positions.ndim != 1:
        raise InvalidInput("positions", f"must have shape [-1], not {list(positions.shape)}")
    if positions.size and positions.min() < 0:
        raise InvalidInput("positions", "must be non-negative")
    last = int(positions.max()) if positions.size else 0
    runtime.limits.last_position(last, "the largest position")
    query = _validated(model, request.parameters, max_len=last + 1)
    limits = runtime.limits
    limits.row_width(query.d_model, "d_model")
    limits.rows(positions.size, query.d_model, "positions × d_model")
    if json_output:
        limits.json_answer(positions.size * query.d_model, hint="ask for binary_data")
    rows = batches.rows_at(runtime, query.key(), positions.astype(np.int64))
    return [wire.Tensor("encodings", wire.NAMES[rows.dtype.name], rows)]


def _applied(kernel: Callable[[Any], batches.Kernel]) -> Run:
    """The run of an apply model: the embeddings with its kernel applied."""

    def run(
        model: Model, runtime: Runtime, request: wire.Request, json_output: bool
    ) -> list[wire.Tensor]:
        embeddings = _tensor(model, request, "embeddings")
        assert embeddings is not None
        position_ids = _tensor(model, request, "position_ids")
        query = _validated(model, request.parameters)
        offset = query.first_row() if isinstance(query, ApplyQuery) else query.offset
        fmt: Format = "json" if json_output else "raw"
        plan = batches.Apply("npy", fmt, False, kernel(query), query.key, offset, query.max_len)
        in_place = embeddings.flags.writeable
        result = batches.apply_arrays(runtime, embeddings, position_ids, plan, in_place)
        return [wire.Tensor("embeddings", wire.NAMES[result.dtype.name], result)]

    return run


SINUSOIDAL: Final = Model(
    "sinusoidal",
    (TensorSpec("positions", INTEGERS, (-1,)),),
    (TensorSpec("encodings", FLOATS, (-1, -1)),),
    BlockQuery,
    frozenset({"max_len", "start", "stop", "dim_start", "dim_stop"}),
    _encodings,
)
_BATCH: Final = (
    TensorSpec("embeddings", FLOATS, (-1, -1, -1)),
    TensorSpec("position_ids", INTEGERS, (-1, -1), optional=True),
)
SINUSOIDAL_APPLY: Final = Model(
    "sinusoidal-apply",
    _BATCH,
    (TensorSpec("embeddings", FLOATS, (-1, -1, -1)),),
    ApplyQuery,
    frozenset({"format"}),
    _applied(lambda query: Additive(query.embedding_scale())),
)
ROTARY_APPLY: Final = Model(
    "rotary-apply",
    _BATCH,
    (TensorSpec("embeddings", FLOATS, (-1, -1, -1)),),
    RotaryApplyQuery,
    frozenset({"format"}),
    _applied(lambda query: Rotation(query.convention)),
)
MODELS: Final = {model.name: model for model in (SINUSOIDAL, SINUSOIDAL_APPLY, ROTARY_APPLY)}


def model(name: str, version: str | None = None) -> Model:
    """The model of that name (and version, if given); else :class:`UnknownModel`."""
    found = MODELS.get(name)
    if found is None:
        raise UnknownModel(f"no model named {shown(name)!r}; the models are {', '.join(MODELS)}")
    if version is not None and version != VERSION:
        raise UnknownModel(f"model {name!r} has no version {shown(version)!r}; it has {VERSION}")
    return found


def infer_parsed(
    runtime: Runtime, served: Model, request: wire.Request
) -> tuple[list[wire.Tensor], set[str]]:
    """The outputs ``request`` asks of ``served``, and which of them go as binary data."""
    unknown = set(request.inputs) - {spec.name for spec in served.inputs}
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidInput(name, f"is not an input of {served.name}")
    names = [spec.name for spec in served.outputs]
    asked = _asked(served, request)
    for name in asked:
        if name not in names:
            raise InvalidInput(name, f"is not an output of {served.name} ({', '.join(names)})")
    binary = _binary(request, asked)
    json_output = any(name not in binary for name in asked)
    outputs = served.run(served, runtime, request, json_output)
    return [tensor for tensor in outputs if tensor.name in asked], binary


def binary(served: Model, request: wire.Request) -> bool:
    """Whether the answer has binary data after its JSON header (its type is then
    ``application/octet-stream``), from the request alone."""
    return bool(_binary(request, _asked(served, request)))


def _asked(served: Model, request: wire.Request) -> dict[str, bool | None]:
    """The outputs asked for, each with its ``binary_data`` (None: the request's default)."""
    names = [spec.name for spec in served.outputs]
    return request.outputs if request.outputs is not None else dict.fromkeys(names)


def _binary(request: wire.Request, asked: Mapping[str, bool | None]) -> set[str]:
    return {
        name for name, flag in asked.items() if (request.binary_default if flag is None else flag)
    }


def answer_bytes(served: Model, request: wire.Request) -> int:
    """How many bytes the answer's tensors and its echoed id take, from the request alone
    (before any check): the batch's, or the rows' at the dtype asked for."""
    # the id is echoed as it came (at most wire.MAX_ID_BYTES, once the wire has checked it)
    echoed = 0 if request.id is None else len(request.id.encode("utf-8", "surrogatepass"))
    if served is SINUSOIDAL:
        positions, width = request.inputs.get("positions"), request.parameters.get("d_model")
        if positions is None or type(width) is not int:
            return echoed
        itemsize = {"float64": 8, "float16": 2}.get(str(request.parameters.get("dtype")), 4)
        return echoed + positions.array.size * max(width, 0) * itemsize
    embeddings = request.inputs.get("embeddings")
    return echoed + (0 if embeddings is None else embeddings.array.nbytes)


def infer(runtime: Runtime, served: Model, request: wire.Request) -> tuple[Headers, memoryview]:
    """A parsed REST infer request run and encoded, in a worker thread."""
    outputs, binary = infer_parsed(runtime, served, request)
    headers, body = wire.encode(served.name, VERSION, request.id, outputs, binary)
    return headers, memoryview(body)

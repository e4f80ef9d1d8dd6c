"""The models served over the Open Inference Protocol, transport-free: one a family the app
serves, made from its declaration (:func:`of_family`: its rows at posted positions, or its
block), and the apply models; each one's metadata, configuration and run on a parsed
request, and an app's :class:`Repository` of them with what each has answered. The
parameters are the v1 endpoints' own query models, so a model takes the same names,
defaults and checks as the endpoint it mirrors; the work is the shared pipelines'
(``ids``, ``batches``, ``handlers``). The REST and gRPC fronts parse their messages into
the same :class:`wire.Request` and call :func:`infer_parsed`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ValidationError

from service import __version__, batches, handlers, ids
from service.codecs.types import Format, Headers
from service.encodings import registry
from service.encodings.additive import Additive
from service.encodings.registry import Family, Key, Rows
from service.encodings.rotation import Rotation
from service.errors import InvalidInput, InvalidParameter, ServiceError
from service.inference import wire
from service.limits import Limits
from service.runtime import Runtime
from service.schemas.rope_nd import RopeNdApplyQuery
from service.schemas.rotary import RotaryApplyQuery
from service.schemas.sinusoidal import ApplyQuery
from service.schemas.vision_rotary import VisionRotaryApplyQuery
from service.text import shown

SERVER: Final = {"name": "positional-encodings", "version": __version__}
EXTENSIONS: Final = ["binary_tensor_data"]
VERSION: Final = "1"
FLOATS: Final = ("FP32", "FP16", "FP64")
INTEGERS: Final = ("INT64", "INT32")


class Positions(Protocol):
    """What a model reads of a family's posted positions (``web.declared.Positions``)."""

    @property
    def axes(self) -> Callable[[Any], int]: ...
    @property
    def integers(self) -> bool: ...
    @property
    def at(self) -> Callable[[Any, Any], Rows] | None: ...
    @property
    def stated(self) -> tuple[int, ...]: ...


class Declared(Protocol):
    """What a model reads of a family's declaration (``web.declared.Declared``, which the
    app gives: the protocol is below the HTTP toolkit, and imports none of it)."""

    @property
    def family(self) -> Family[Any]: ...
    @property
    def query(self) -> type[BaseModel]: ...
    @property
    def key(self) -> Callable[[Any], Any]: ...
    @property
    def block(self) -> Callable[[Any, Any], handlers.Block]: ...
    @property
    def check(self) -> Callable[[Any, Limits, Format], None] | None: ...
    @property
    def positions(self) -> Positions | None: ...
    @property
    def width_name(self) -> str: ...
    @property
    def shape(self) -> str: ...
    @property
    def output(self) -> str: ...


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
    # the bytes of the answer's tensors, from the parsed request (0 where it is refused:
    # the run refuses it the same way)
    size: Callable[[Model, wire.Request], int]

    @property
    def parameters(self) -> list[str]:
        return [name for name in self.query.model_fields if name not in self.fixed]

    def config(self) -> dict[str, Any]:
        """The model's configuration as Triton states it (``GET .../config``, gRPC
        ``ModelConfig``: what ``get_model_config`` reads): no batching of its own, the
        tensors with their first datatype, the request parameters named."""

        def tensor(spec: TensorSpec) -> dict[str, Any]:
            entry = {"name": spec.name, "data_type": "TYPE_" + spec.datatypes[0]}
            return {**entry, "dims": list(spec.shape), "optional": spec.optional}

        outputs = [tensor(spec) for spec in self.outputs]
        return {
            "name": self.name,
            "platform": SERVER["name"],
            "backend": SERVER["name"],
            "max_batch_size": 0,
            "version_policy": {"latest": {"num_versions": 1}},
            "input": [tensor(spec) for spec in self.inputs],
            "output": [{k: v for k, v in out.items() if k != "optional"} for out in outputs],
            "parameters": {"request": {"string_value": ",".join(self.parameters)}},
        }

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


def _applied(
    kernel: Callable[[Any], batches.Kernel],
    offset: Callable[[Any], int] = lambda query: query.offset,
    max_len: Callable[[Any], int | None] = lambda query: query.max_len,
) -> Run:
    """The run of an apply model: the embeddings with its kernel applied, the table's rows
    from ``offset`` (of ``max_len`` rows) as the query says."""

    def run(
        model: Model, runtime: Runtime, request: wire.Request, json_output: bool
    ) -> list[wire.Tensor]:
        embeddings = _tensor(model, request, "embeddings")
        assert embeddings is not None
        takes_ids = any(spec.name == "position_ids" for spec in model.inputs)
        position_ids = _tensor(model, request, "position_ids") if takes_ids else None
        query = _validated(model, request.parameters)
        fmt: Format = "json" if json_output else "raw"
        plan = batches.Apply(
            "npy", fmt, False, kernel(query), query.key, offset(query), max_len(query)
        )
        in_place = embeddings.flags.writeable
        result = batches.apply_arrays(runtime, embeddings, position_ids, plan, in_place)
        return [wire.Tensor("embeddings", wire.NAMES[result.dtype.name], result)]

    return run


_BATCH: Final = (
    TensorSpec("embeddings", FLOATS, (-1, -1, -1)),
    TensorSpec("position_ids", INTEGERS, (-1, -1), optional=True),
)


def _batch_bytes(model: Model, request: wire.Request) -> int:
    embeddings = request.inputs.get("embeddings")
    return 0 if embeddings is None else embeddings.array.nbytes


SINUSOIDAL_APPLY: Final = Model(
    "sinusoidal-apply",
    _BATCH,
    (TensorSpec("embeddings", FLOATS, (-1, -1, -1)),),
    ApplyQuery,
    frozenset({"format"}),
    _applied(lambda query: Additive(query.embedding_scale()), lambda query: query.first_row()),
    _batch_bytes,
)
ROTARY_APPLY: Final = Model(
    "rotary-apply",
    _BATCH,
    (TensorSpec("embeddings", FLOATS, (-1, -1, -1)),),
    RotaryApplyQuery,
    frozenset({"format"}),
    _applied(lambda query: Rotation(query.convention)),
    _batch_bytes,
)
# (B, heads, L, head_dim), turned by the table of the grid's L tokens (text tokens first)
_HEADS: Final = (TensorSpec("embeddings", FLOATS, (-1, -1, -1, -1)),)
ROPE_ND_APPLY: Final = Model(
    "rope-nd-apply",
    _HEADS,
    _HEADS,
    RopeNdApplyQuery,
    frozenset({"format", "shape", "dtype"}),
    _applied(
        lambda query: Rotation("half" if query.layout == "half" else "interleaved"),
        lambda query: 0,
        lambda query: query.table_key("float32").tokens,
    ),
    _batch_bytes,
)
# (B, heads, L, head_dim), turned by the image's first L tokens with the model's pairs
VISION_ROTARY_APPLY: Final = Model(
    "vision-rotary-apply",
    _HEADS,
    _HEADS,
    VisionRotaryApplyQuery,
    frozenset({"format", "shape", "dtype"}),
    _applied(
        lambda query: Rotation("interleaved" if query.interleaved else "half"),
        lambda query: 0,
        lambda query: query.table_key("float32").tokens,
    ),
    _batch_bytes,
)
APPLY: Final = (SINUSOIDAL_APPLY, ROTARY_APPLY, ROPE_ND_APPLY, VISION_ROTARY_APPLY)
# what a model of a table's rows decides from its positions: the GET's window
# (``max_len`` stays a parameter: a scaling may read it, as longrope's choice of factors;
# by default the positions' largest + 1)
_WINDOW: Final = frozenset({"start", "stop", "dim_start", "dim_stop", "format"})
# the datatypes of positions that need not be integers (diffusion timesteps, grid ids)
_REALS: Final = ("FP32", "FP64", "INT64", "INT32")


def of_family(declared: Declared) -> Model:
    """The model of a declared family, named as the family: rows at the ``positions``
    input (integers, or any finite numbers where the family takes them; ``[n_axes, L]``
    where its ids have several axes) for a cached table, each of its named arrays an
    output (else one, named as the family declares); or, for a family computed per
    request (ALiBi), the block its ``GET`` parameters name, with no input. The parameters
    are its ``GET``'s, checked as the ``GET`` checks them, less those the positions
    decide."""
    family, fields = declared.family, declared.query.model_fields
    names = family.arrays or (declared.output,)
    if family.block is not None:
        dims = (-1,) * len(declared.shape.split(","))
        outputs = tuple(TensorSpec(name, FLOATS, dims) for name in names)
        fixed = frozenset({"format"})
        return Model(
            family.name, (), outputs, declared.query, fixed, _block(declared), _sized(declared)
        )
    spec = declared.positions
    integers = spec is None or spec.integers
    ids = TensorSpec(
        "positions", INTEGERS if integers else _REALS, (-1,) if spec is None else spec.stated
    )
    outputs = tuple(TensorSpec(name, FLOATS, (-1, -1)) for name in names)
    fixed = _WINDOW & set(fields)
    return Model(
        family.name, (ids,), outputs, declared.query, fixed, _rows(declared), _sized(declared)
    )


@dataclass(frozen=True, slots=True)
class _Read:
    """A rows model's request read: its query and key, its positions (``(L,)`` or
    ``(axes, L)``), their count and their largest magnitude."""

    query: Any
    key: Key
    positions: NDArray[Any]
    axes: int
    count: int
    last: int


def _read(declared: Declared, model: Model, request: wire.Request, limits: Limits | None) -> _Read:
    """The positions checked (non-negative integers, or finite numbers, the largest within
    ``limits``; shaped for the key's axes) and the parameters validated, ``max_len`` the
    positions' reach unless the request gives it (as ``POST .../positions`` takes it)."""
    spec = declared.positions
    integers = spec is None or spec.integers
    positions = _tensor(model, request, "positions")
    assert positions is not None
    last = 0
    if positions.size:
        if integers:
            low = int(positions.min())
            if low < 0:
                raise InvalidInput("positions", f"must be non-negative, not {low}")
            last = int(positions.max())
        elif not np.isfinite(positions).all():
            raise InvalidInput("positions", "must be finite numbers")
        else:
            last = math.ceil(float(np.abs(positions).max()))
    if limits is not None:  # before max_len is made of it
        limits.last_position(last, "the largest position")
    tabled = "max_len" in declared.query.model_fields
    given = {"max_len": last + 1} if tabled and "max_len" not in request.parameters else {}
    query = _validated(model, request.parameters, **given)
    key = declared.key(query)
    if integers and not tabled and (spec is None or spec.at is None):
        # rows of a table whose rows its key decides (a grid's tokens): the GET's stop
        # (ids a family computes at, as patch coordinates, are not rows)
        rows = declared.block(query, key).max_len
        if last >= rows:
            raise InvalidInput(
                "positions", f"must be below the table's {rows:,} rows, not {last:,}"
            )
    axes = 1 if spec is None else spec.axes(key)
    wanted = ("-1",) if axes == 1 else (str(axes), "-1")
    if positions.ndim != len(wanted) or (axes > 1 and positions.shape[0] != axes):
        shape = f"[{', '.join(wanted)}]"
        raise InvalidInput("positions", f"must have shape {shape}, not {list(positions.shape)}")
    return _Read(query, key, positions, axes, positions.size // axes, last)


def _rows(declared: Declared) -> Run:
    """The run of a rows model: one row per position, each named array an output."""
    spec = declared.positions
    integers = spec is None or spec.integers
    at = None if spec is None else spec.at

    def run(
        model: Model, runtime: Runtime, request: wire.Request, json_output: bool
    ) -> list[wire.Tensor]:
        limits = runtime.limits
        read = _read(declared, model, request, limits)
        key = read.key
        if registry.shift(key):
            limits.last_position(read.last + registry.shift(key), "the largest position")
        limits.row_width(key.width, declared.width_name)
        limits.rows(read.count, key.width, "positions × width")
        if json_output:
            limits.json_answer(read.count * key.width, hint="ask for binary_data")
        arrays = ids.rows_of(runtime, key, read.positions, read.count, integers, at)
        return [
            wire.Tensor(name, wire.NAMES[array.dtype.name], array)
            for name, array in zip(family_names(declared), arrays, strict=True)
        ]

    return run


def family_names(declared: Declared) -> tuple[str, ...]:
    """The names of a family's outputs: its row's named arrays, or its one."""
    return declared.family.arrays or (declared.output,)


def _sized(declared: Declared) -> Callable[[Model, wire.Request], int]:
    """The bytes of a family model's answer: its rows' at the positions, or its block's."""

    def size(model: Model, request: wire.Request) -> int:
        try:
            if declared.family.block is not None:
                query = _validated(model, request.parameters)
                key = declared.key(query)
                return int(declared.block(query, key).nbytes)
            read = _read(declared, model, request, None)
        except ServiceError:
            return 0
        return read.count * registry.row_bytes(read.key)

    return size


def _block(declared: Declared) -> Run:
    """The run of a model computed per request: the block its parameters name, checked as
    its ``GET`` checks it."""

    def run(
        model: Model, runtime: Runtime, request: wire.Request, json_output: bool
    ) -> list[wire.Tensor]:
        query = _validated(model, request.parameters)
        key = declared.key(query)
        block = declared.block(query, key)
        fmt: Format = "json" if json_output else "raw"
        if declared.check is not None:
            declared.check(query, runtime.limits, fmt)
        else:
            handlers.check_table(runtime.limits, block, fmt, declared.width_name)
        values = registry.block(key, block.start, block.stop)
        if json_output and not np.isfinite(values).all():
            raise InvalidInput(
                "outputs", "hold -inf (masked entries), which JSON cannot: ask for binary_data"
            )
        return [wire.Tensor(declared.output, wire.NAMES[values.dtype.name], values)]

    return run


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
    """How many bytes the answer's tensors and its echoed id take, from the parsed request
    (before the run's checks): the rows' or the block's at the dtype asked for, or the
    batch's."""
    # the id is echoed as it came (at most wire.MAX_ID_BYTES, once the wire has checked it)
    echoed = 0 if request.id is None else len(request.id.encode("utf-8", "surrogatepass"))
    return echoed + served.size(served, request)


def work(message_bytes: int, answer: int) -> int:
    """The numbers a run works on, for its lane (``Runtime.compute``): about four bytes a
    number, of the message or of its answer (:func:`answer_bytes`), whichever is larger. A
    request of a few bytes may ask for PE_MAX_ELEMENTS numbers (ALiBi's block, rows of a
    wide table): counted by its message alone, it took the quick lane, and small requests
    waited seconds behind it."""
    return max(message_bytes, answer) // 4


def infer(runtime: Runtime, served: Model, request: wire.Request) -> tuple[Headers, memoryview]:
    """A parsed REST infer request run and encoded, in a worker thread."""
    outputs, binary = infer_parsed(runtime, served, request)
    headers, body = wire.encode(served.name, VERSION, request.id, outputs, binary)
    return headers, memoryview(body)


@dataclass(slots=True)
class Statistics:
    """What a model has answered (in this worker process), as Triton's statistics count
    it: successes and failures with their time, the last one's (ms since the epoch)."""

    success: int = 0
    success_ns: int = 0
    fail: int = 0
    fail_ns: int = 0
    last_inference: int = 0

    def record(self, ok: bool, ns: int) -> None:
        if ok:
            self.success += 1
            self.success_ns += ns
        else:
            self.fail += 1
            self.fail_ns += ns
        self.last_inference = time.time_ns() // 1_000_000

    def document(self, name: str) -> dict[str, Any]:
        """As ``GET /v2/models/{name}/stats`` answers each model (Triton's statistics
        extension); the stages the service does not time apart are zero."""

        def duration(count: int = 0, ns: int = 0) -> dict[str, int]:
            return {"count": count, "ns": ns}

        unmeasured = ("queue", "compute_input", "compute_infer", "compute_output")
        return {
            "name": name,
            "version": VERSION,
            "last_inference": self.last_inference,
            "inference_count": self.success,
            "execution_count": self.success,
            "inference_stats": {
                "success": duration(self.success, self.success_ns),
                "fail": duration(self.fail, self.fail_ns),
                **{stage: duration() for stage in unmeasured},
                "cache_hit": duration(),
                "cache_miss": duration(),
            },
            "batch_stats": [],
        }


@dataclass(frozen=True, slots=True)
class Repository:
    """The models an app serves, by name: one per declared family (its rows or its block)
    and the apply models; and what each has answered."""

    models: Mapping[str, Model]
    statistics: dict[str, Statistics] = field(default_factory=dict)

    @classmethod
    def of(cls, served: Sequence[Declared]) -> Repository:
        """The models of the ``served`` families, and the apply models."""
        found: dict[str, Model] = {}
        for each in [*map(of_family, served), *APPLY]:
            if each.name in found:
                raise TypeError(f"two models are named {each.name!r}")
            found[each.name] = each
        return cls(found, {name: Statistics() for name in found})

    def model(self, name: str, version: str | None = None) -> Model:
        """The model of that name (and version, if given); else :class:`UnknownModel`."""
        found = self.models.get(name)
        if found is None:
            raise UnknownModel(
                f"no model named {shown(name)!r}; the models are {', '.join(self.models)}"
            )
        if version is not None and version != VERSION:
            raise UnknownModel(
                f"model {name!r} has no version {shown(version)!r}; it has {VERSION}"
            )
        return found

    def index(
        self, ready: bool, only_ready: bool = False, repository: str = ""
    ) -> list[dict[str, str]]:
        """The repository index (``POST /v2/repository/index``, gRPC ``RepositoryIndex``):
        every model, its version and state (READY once the server is; nothing to load or
        unload), or only those ready; there is one repository, named ``""``."""
        if repository:
            raise InvalidInput("repository_name", "must be empty: the service has one repository")
        if only_ready and not ready:
            return []
        state = "READY" if ready else "UNAVAILABLE"
        reason = "" if ready else "the PE_PRELOAD tables are being computed"
        return [
            {"name": name, "version": VERSION, "state": state, "reason": reason}
            for name in self.models
        ]

    def stats(self, name: str | None = None, version: str | None = None) -> dict[str, Any]:
        """The statistics of one model (and version), or of them all."""
        if name is None and version is not None:
            raise InvalidInput("version", "names a version of no model: give the model's name")
        names = list(self.models) if name is None else [self.model(name, version).name]
        return {"model_stats": [self.statistics[each].document(each) for each in names]}

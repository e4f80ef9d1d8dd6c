"""The Open Inference Protocol over REST (KServe v2, as Triton and MLServer speak it): the
server's and the models' health, metadata and configuration, the repository index, the
models' statistics, and ``infer`` with JSON tensors or the binary tensor data extension.
The models are the app's (:class:`models.Repository`: one per family it serves). Errors are
the protocol's ``{"error": "..."}`` (``web.problems``)."""

from __future__ import annotations

import time
from typing import Any, Final, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from service import handlers
from service.codecs.types import Headers
from service.errors import InvalidInput, Limit, ServiceError, UnsupportedMediaType
from service.inference import models, wire
from service.limits import reserving
from service.runtime import Runtime
from service.web.answers import Offer, Plan, answer
from service.web.bodies import read_posted
from service.web.deps import RuntimeDep
from service.web.disconnect import unless_gone
from service.web.negotiation import combined


class CompressedBody(UnsupportedMediaType):
    """A body sent with a ``Content-Encoding``: bodies are read as they are sent."""

    def __init__(self, encoding: str) -> None:
        ServiceError.__init__(
            self, f"Content-Encoding {encoding!r} is not read: send the body uncompressed"
        )


_ERROR: Final = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}},
                "required": ["error"],
            }
        }
    }
}
_BINARY: Final = {"schema": {"type": "string", "format": "binary"}}


def _errors(**causes: str) -> dict[int | str, dict[str, Any]]:
    return {int(status[1:]): {**_ERROR, "description": text} for status, text in causes.items()}


_EMPTY: Final[dict[int | str, dict[str, Any]]] = {
    200: {"description": "True: the body is empty."},
    400: {"description": "False: the body is empty."},
}
_UNKNOWN = _errors(s404="No model of that name or version.")


_INFER: Final[dict[str, Any]] = {
    "operation_id": "inferModel",
    "summary": "Run a model: JSON tensors, or binary tensor data after the JSON header.",
    "response_class": Response,
    "openapi_extra": {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
            "description": "The inference request; with Inference-Header-Content-Length, "
            "its first that many bytes, followed by the inputs' binary data.",
        }
    },
    "responses": {
        200: {
            "description": "The outputs: JSON, or JSON followed by binary data "
            "(Inference-Header-Content-Length says where it ends).",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "application/octet-stream": _BINARY,
            },
        },
        **_errors(
            s400="The request is malformed, or a parameter or input is invalid.",
            s404="No model of that name or version.",
            s408="The body did not arrive in time.",
            s413="The body is over PE_MAX_BODY_BYTES.",
            s415="The body is compressed (Content-Encoding), which is not supported.",
            s503="Busy: the bodies posted at once would pass PE_POSTED_BYTES; send it again "
            "after Retry-After seconds.",
        ),
    },
}


def _uncompressed(request: Request) -> None:
    """Refuses a body sent with a ``Content-Encoding`` (but ``identity``)."""
    encoding = combined(request.scope["headers"], b"content-encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise CompressedBody(encoding)


class IndexRequest(BaseModel):
    """The body of a repository index request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository_name: str = ""
    ready: bool = False


_INDEX_BODY: Final = {
    "required": False,
    "content": {
        "application/json": {
            "schema": IndexRequest.model_json_schema(),
            "example": {"ready": True},
        }
    },
}
# an index request's body is a few fields
_INDEX_BYTES: Final = 4096


async def _index_request(request: Request, runtime: Runtime) -> IndexRequest:
    """The index request's body, read within a few KiB: empty (as tritonclient sends it),
    or ``{"repository_name": "", "ready": bool}``."""
    _uncompressed(request)
    limit = Limit(_INDEX_BYTES, "the index request's own limit")
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, limit, reservation)
        if not body.strip():
            return IndexRequest()
        try:
            asked = IndexRequest.model_validate_json(bytes(body), strict=True)
        except ValidationError as exc:
            error = exc.errors()[0]
            name = ".".join(str(part) for part in error["loc"]) or "body"
            raise InvalidInput(name, error["msg"]) from None
    return asked


def router(repository: models.Repository) -> APIRouter:
    """The protocol's routes, for the models of ``repository``."""
    routes = APIRouter(prefix="/v2", tags=["inference"])

    @routes.get("", operation_id="getInferenceServer", summary="The server and its extensions.")
    # as the protocol's published document names it (no redirect for a client to follow)
    @routes.get("/", include_in_schema=False)
    async def server() -> dict[str, Any]:
        """The server's name and version, and the protocol extensions it speaks."""
        return {**models.SERVER, "extensions": models.EXTENSIONS}

    @routes.get(
        "/health/live",
        operation_id="getInferenceLive",
        summary="200 while the server answers (the protocol's liveness).",
        response_class=Response,
        responses=_EMPTY,
    )
    async def live() -> Response:
        """200 while the server answers."""
        return Response(status_code=200)

    @routes.get(
        "/health/ready",
        operation_id="getInferenceReady",
        summary="200 once the PE_PRELOAD tables are computed, 400 before.",
        response_class=Response,
        responses=_EMPTY,
    )
    async def ready(runtime: RuntimeDep) -> Response:
        """200 once the PE_PRELOAD tables are computed, 400 before (as ``/readyz``)."""
        return Response(status_code=200 if runtime.ready else 400)

    @routes.post(
        "/repository/index",
        operation_id="getInferenceRepositoryIndex",
        summary="Every model, its version and state (Triton's model repository extension).",
        openapi_extra={"requestBody": _INDEX_BODY},
        responses=_errors(
            s400="The body is not an index request, or names another repository.",
            s408="The body did not arrive in time.",
            s413="The body is over 4 KiB.",
            s415="The body is compressed (Content-Encoding), which is not supported.",
            s503="Busy: the bodies posted at once would pass PE_POSTED_BYTES; send it again "
            "after Retry-After seconds.",
        ),
    )
    async def index(request: Request, runtime: RuntimeDep) -> list[dict[str, str]]:
        """Every model with its version and state: READY once the server is. The body is
        optional: ``{"ready": true}`` lists only the models ready to answer, and a
        ``repository_name`` other than ``""`` is refused (the service has one repository,
        and every model in it is loaded)."""
        asked = await _index_request(request, runtime)
        return repository.index(runtime.ready, asked.ready, asked.repository_name)

    @routes.get(
        "/models/stats",
        operation_id="getInferenceStatistics",
        summary="Every model's statistics in this worker (Triton's statistics extension).",
    )
    async def statistics() -> dict[str, Any]:
        """What each model has answered in this worker process: successes and failures,
        with their time."""
        return repository.stats()

    @routes.get(
        "/models/{name}",
        operation_id="getInferenceModel",
        summary="A model's metadata: its inputs, outputs and request parameters.",
        responses=_UNKNOWN,
    )
    async def metadata(name: str) -> dict[str, Any]:
        """A model's metadata: its inputs and outputs (-1: a dimension that varies), and
        the parameters a request may give."""
        return repository.model(name).document()

    @routes.get(
        "/models/{name}/versions/{version}",
        operation_id="getInferenceModelVersion",
        summary="A model version's metadata.",
        responses=_UNKNOWN,
    )
    async def version_metadata(name: str, version: str) -> dict[str, Any]:
        """A model version's metadata (each model has version 1)."""
        return repository.model(name, version).document()

    @routes.get(
        "/models/{name}/config",
        operation_id="getInferenceModelConfig",
        summary="A model's configuration, as Triton states it (get_model_config).",
        responses=_UNKNOWN,
    )
    async def config(name: str) -> dict[str, Any]:
        """A model's configuration: its tensors with Triton's types, no batching."""
        return repository.model(name).config()

    @routes.get(
        "/models/{name}/versions/{version}/config",
        operation_id="getInferenceModelVersionConfig",
        summary="A model version's configuration.",
        responses=_UNKNOWN,
    )
    async def version_config(name: str, version: str) -> dict[str, Any]:
        """A model version's configuration (each model has version 1)."""
        return repository.model(name, version).config()

    @routes.get(
        "/models/{name}/stats",
        operation_id="getInferenceModelStatistics",
        summary="A model's statistics in this worker.",
        responses=_UNKNOWN,
    )
    async def model_statistics(name: str) -> dict[str, Any]:
        """What the model has answered in this worker process."""
        return repository.stats(name)

    @routes.get(
        "/models/{name}/versions/{version}/stats",
        operation_id="getInferenceModelVersionStatistics",
        summary="A model version's statistics in this worker.",
        responses=_UNKNOWN,
    )
    async def version_statistics(name: str, version: str) -> dict[str, Any]:
        """What the model version has answered in this worker process."""
        return repository.stats(name, version)

    @routes.get(
        "/models/{name}/ready",
        operation_id="getInferenceModelReady",
        summary="200 when the model is ready (when the server is), 400 before.",
        response_class=Response,
        responses={**_EMPTY, **_UNKNOWN},
    )
    async def model_ready(name: str, runtime: RuntimeDep) -> Response:
        """200 when the model is ready: when the server is."""
        repository.model(name)
        return Response(status_code=200 if runtime.ready else 400)

    @routes.get(
        "/models/{name}/versions/{version}/ready",
        operation_id="getInferenceModelVersionReady",
        summary="200 when the model version is ready (when the server is), 400 before.",
        response_class=Response,
        responses={**_EMPTY, **_UNKNOWN},
    )
    async def model_version_ready(name: str, version: str, runtime: RuntimeDep) -> Response:
        """200 when the model version is ready: when the server is."""
        repository.model(name, version)
        return Response(status_code=200 if runtime.ready else 400)

    @routes.post("/models/{name}/infer", **_INFER)
    async def infer(name: str, request: Request, runtime: RuntimeDep) -> Response:
        """Run a model on the posted tensors."""
        return await _counted(repository, repository.model(name), request, runtime)

    @routes.post(
        "/models/{name}/versions/{version}/infer",
        **{**_INFER, "operation_id": "inferModelVersion"},
    )
    async def infer_version(
        name: str, version: str, request: Request, runtime: RuntimeDep
    ) -> Response:
        """Run a model version on the posted tensors."""
        return await _counted(repository, repository.model(name, version), request, runtime)

    return routes


async def _counted(
    repository: models.Repository, served: models.Model, request: Request, runtime: RuntimeDep
) -> Response:
    """The answer of ``_infer``, counted in the model's statistics."""
    began, ok = time.perf_counter_ns(), False
    try:
        response = await _infer(served, request, runtime)
        ok = True
        return response
    finally:
        repository.statistics[served.name].record(ok, time.perf_counter_ns() - began)


async def _infer(served: models.Model, request: Request, runtime: RuntimeDep) -> Response:
    raw = request.scope["headers"]
    _uncompressed(request)
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
        length = wire.header_length(combined(raw, b"inference-header-content-length"), len(body))
        elements = len(body) // 4  # about four bytes a number, in JSON or binary
        limit = runtime.limits.json_elements

        parsed, size = await unless_gone(
            request, lambda: runtime.compute(elements, _parsed, served, body, length, limit)
        )

        async def encode(fmt: Literal["json", "raw"], gzip: bool) -> tuple[Headers, memoryview]:
            work = models.work(len(body), size)  # in the answer's lane, not the body's
            return await runtime.compute(work, models.infer, runtime, served, parsed)

        # the protocol's answer is not negotiated: JSON, or JSON followed by its tensors'
        # data in binary where the request asks (typed as raw bytes are); nothing kept,
        # nothing gzipped
        fmt: Literal["json", "raw"] = "raw" if models.binary(served, parsed) else "json"
        offer = Offer((fmt,), fmt)
        large = size > handlers.LARGE_ANSWER_BYTES
        plan = Plan(offer, encode, large=large, vary=False, gzip_from=None)
        return await answer(request, runtime, plan)


def _parsed(
    served: models.Model, body: bytearray, length: int | None, numbers: Limit
) -> tuple[wire.Request, int]:
    """The request read, and its answer's bytes (a worker thread: a model's key may cost)."""
    parsed = wire.parse(body, length, numbers)
    return parsed, models.answer_bytes(served, parsed)

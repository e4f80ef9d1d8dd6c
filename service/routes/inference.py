"""The Open Inference Protocol over REST (KServe v2, as Triton and MLServer speak it): the
server's and the models' health and metadata, and ``infer`` with JSON tensors or the binary
tensor data extension. Errors are the protocol's ``{"error": "..."}`` (``web.problems``)."""

from __future__ import annotations

from typing import Any, Final, Literal

from fastapi import APIRouter, Request, Response

from service import handlers
from service.codecs.types import Headers
from service.errors import ServiceError, UnsupportedMediaType
from service.inference import models, wire
from service.limits import reserving
from service.web.answers import Offer, Plan, answer
from service.web.bodies import read_posted
from service.web.deps import RuntimeDep
from service.web.disconnect import unless_gone
from service.web.negotiation import combined

router = APIRouter(prefix="/v2", tags=["inference"])


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


@router.get("", operation_id="getInferenceServer", summary="The server and its extensions.")
async def server() -> dict[str, Any]:
    """The server's name and version, and the protocol extensions it speaks."""
    return {**models.SERVER, "extensions": models.EXTENSIONS}


@router.get(
    "/health/live",
    operation_id="getInferenceLive",
    summary="200 while the server answers (the protocol's liveness).",
    response_class=Response,
    responses=_EMPTY,
)
async def live() -> Response:
    """200 while the server answers."""
    return Response(status_code=200)


@router.get(
    "/health/ready",
    operation_id="getInferenceReady",
    summary="200 once the PE_PRELOAD tables are computed, 400 before.",
    response_class=Response,
    responses=_EMPTY,
)
async def ready(runtime: RuntimeDep) -> Response:
    """200 once the PE_PRELOAD tables are computed, 400 before (as ``/readyz``)."""
    return Response(status_code=200 if runtime.ready else 400)


@router.get(
    "/models/{name}",
    operation_id="getInferenceModel",
    summary="A model's metadata: its inputs, outputs and request parameters.",
    responses=_UNKNOWN,
)
async def metadata(name: str) -> dict[str, Any]:
    """A model's metadata: its inputs and outputs (-1: a dimension that varies), and the
    parameters a request may give."""
    return models.model(name).document()


@router.get(
    "/models/{name}/versions/{version}",
    operation_id="getInferenceModelVersion",
    summary="A model version's metadata.",
    responses=_UNKNOWN,
)
async def version_metadata(name: str, version: str) -> dict[str, Any]:
    """A model version's metadata (each model has version 1)."""
    return models.model(name, version).document()


@router.get(
    "/models/{name}/ready",
    operation_id="getInferenceModelReady",
    summary="200 when the model is ready (when the server is), 400 before.",
    response_class=Response,
    responses={**_EMPTY, **_UNKNOWN},
)
async def model_ready(name: str, runtime: RuntimeDep) -> Response:
    """200 when the model is ready: when the server is."""
    models.model(name)
    return Response(status_code=200 if runtime.ready else 400)


@router.get(
    "/models/{name}/versions/{version}/ready",
    operation_id="getInferenceModelVersionReady",
    summary="200 when the model version is ready (when the server is), 400 before.",
    response_class=Response,
    responses={**_EMPTY, **_UNKNOWN},
)
async def model_version_ready(name: str, version: str, runtime: RuntimeDep) -> Response:
    """200 when the model version is ready: when the server is."""
    models.model(name, version)
    return Response(status_code=200 if runtime.ready else 400)


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


@router.post("/models/{name}/infer", **_INFER)
async def infer(name: str, request: Request, runtime: RuntimeDep) -> Response:
    """Run a model on the posted tensors."""
    return await _infer(models.model(name), request, runtime)


@router.post(
    "/models/{name}/versions/{version}/infer", **{**_INFER, "operation_id": "inferModelVersion"}
)
async def infer_version(name: str, version: str, request: Request, runtime: RuntimeDep) -> Response:
    """Run a model version on the posted tensors."""
    return await _infer(models.model(name, version), request, runtime)


async def _infer(served: models.Model, request: Request, runtime: RuntimeDep) -> Response:
    raw = request.scope["headers"]
    encoding = combined(raw, b"content-encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise CompressedBody(encoding)
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
        length = wire.header_length(combined(raw, b"inference-header-content-length"), len(body))
        elements = len(body) // 4  # about four bytes a number, in JSON or binary
        limit = runtime.limits.json_elements

        parsed = await unless_gone(
            request, lambda: runtime.compute(elements, wire.parse, body, length, limit)
        )

        async def encode(fmt: Literal["json", "raw"], gzip: bool) -> tuple[Headers, memoryview]:
            return await runtime.compute(elements, models.infer, runtime, served, parsed)

        # the protocol's answer is not negotiated: JSON, or JSON followed by its tensors'
        # data in binary where the request asks (typed as raw bytes are); nothing kept,
        # nothing gzipped
        fmt: Literal["json", "raw"] = "raw" if models.binary(served, parsed) else "json"
        offer = Offer((fmt,), fmt)
        large = models.answer_bytes(served, parsed) > handlers.LARGE_ANSWER_BYTES
        plan = Plan(offer, encode, large=large, vary=False, gzip_from=None)
        return await answer(request, runtime, plan)

"""The Open Inference Protocol over gRPC (KServe v2's ``inference.GRPCInferenceService``):
health, metadata, configuration, the repository index, statistics and ``ModelInfer`` of
the same models as the REST routes, served by a ``grpc.aio`` server on the app's event
loop, with its runtime (cache, lanes, permits). The other methods of Triton's superset of
the service (loading and unloading models, shared memory, trace and log settings) answer
UNIMPLEMENTED.

Needs the grpc extra; :mod:`service.inference.serving` imports this module only when
``PE_GRPC_PORT`` is set."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2
from tritonclient.grpc import service_pb2 as pb

from service import handlers
from service.errors import Limit, LimitExceeded, ServiceError
from service.inference import grpc_bounds, grpc_wire, models, wire
from service.limits import reserving
from service.runtime import Runtime

SERVICE: Final = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].full_name
# a message's names, shapes and parameters, beside its tensors' PE_MAX_BODY_BYTES
HEADER_BYTES: Final = 64 << 10
# the messages of the methods but ModelInfer: a model's name and version, a repository's
# name; read on the event loop, so refused past this many bytes before protobuf reads them
SMALL_BYTES: Final = 64 << 10
MIN_CALLS: Final = 8
_INT32_MAX: Final = (1 << 31) - 1
# the service's errors by status, as gRPC codes; a limit's is RESOURCE_EXHAUSTED, as is
# gRPC's own refusal of a message over grpc.max_receive_message_length
_CODES: Final = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    404: grpc.StatusCode.NOT_FOUND,
    408: grpc.StatusCode.DEADLINE_EXCEEDED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    499: grpc.StatusCode.CANCELLED,
    501: grpc.StatusCode.UNIMPLEMENTED,
    503: grpc.StatusCode.UNAVAILABLE,
}
logger = logging.getLogger("service")
T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


def code(error: ServiceError) -> grpc.StatusCode:
    """The gRPC status code of one of the service's errors."""
    if isinstance(error, LimitExceeded):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    return _CODES.get(error.status, grpc.StatusCode.INTERNAL)


async def _answer(context: Context, work: Awaitable[T], empty: T) -> T:
    """What ``work`` gives; a service error as its status code and detail; anything else
    logged, and INTERNAL with no detail of it. A refusal sets the status and returns
    ``empty`` (which gRPC does not send with a status that is not OK) rather than raising
    ``context.abort``'s exception: that one, with the traceback it carries, kept each refused
    call's message in reference cycles until a full collection (16 MB messages refused in
    a loop took a server from 1.4 to 2.3 GB)."""
    try:
        return await work
    except ServiceError as exc:
        status, detail = code(exc), exc.detail
    except Exception:
        logger.exception("unhandled error in a gRPC call")
        status = grpc.StatusCode.INTERNAL
        detail = "the service failed to answer this call; it has been logged"
    context.set_code(status)
    context.set_details(detail)
    return empty


class Servicer:
    """The methods of the service that this server speaks, on ``runtime``, for the models
    of ``repository``."""

    def __init__(self, runtime: Runtime, repository: models.Repository) -> None:
        self.runtime = runtime
        self.repository = repository

    async def server_live(self, request: Any, context: Context) -> Any:
        return pb.ServerLiveResponse(live=True)

    async def server_ready(self, request: Any, context: Context) -> Any:
        return pb.ServerReadyResponse(ready=self.runtime.ready)

    async def model_ready(self, request: Any, context: Context) -> Any:
        async def ready() -> Any:
            self.repository.model(request.name, request.version or None)
            return pb.ModelReadyResponse(ready=self.runtime.ready)

        return await _answer(context, ready(), pb.ModelReadyResponse())

    async def server_metadata(self, request: Any, context: Context) -> Any:
        return pb.ServerMetadataResponse(**models.SERVER, extensions=models.EXTENSIONS)

    async def model_metadata(self, request: Any, context: Context) -> Any:
        async def metadata() -> Any:
            document = self.repository.model(request.name, request.version or None).document()
            tensors = {
                kind: [
                    pb.ModelMetadataResponse.TensorMetadata(
                        name=spec["name"], datatype=spec["datatype"], shape=spec["shape"]
                    )
                    for spec in document[kind]
                ]
                for kind in ("inputs", "outputs")
            }
            return pb.ModelMetadataResponse(
                name=document["name"],
                versions=document["versions"],
                platform=document["platform"],
                **tensors,
            )

        return await _answer(context, metadata(), pb.ModelMetadataResponse())

    async def model_config(self, request: Any, context: Context) -> Any:
        """The model's configuration: the REST answer's document, as Triton's message."""

        async def config() -> Any:
            document = self.repository.model(request.name, request.version or None).config()
            message = json_format.ParseDict(document, model_config_pb2.ModelConfig())
            return pb.ModelConfigResponse(config=message)

        return await _answer(context, config(), pb.ModelConfigResponse())

    async def repository_index(self, request: Any, context: Context) -> Any:
        """Every model (only those ready, with ``ready``), as the REST index: a
        ``repository_name`` other than ``""`` is refused (the service has one)."""

        async def index() -> Any:
            ready, asked = self.runtime.ready, request.ready
            entries = self.repository.index(ready, asked, request.repository_name)
            return pb.RepositoryIndexResponse(
                models=[pb.RepositoryIndexResponse.ModelIndex(**entry) for entry in entries]
            )

        return await _answer(context, index(), pb.RepositoryIndexResponse())

    async def model_statistics(self, request: Any, context: Context) -> Any:
        """A model's statistics (every model's, for no name): the REST answer's document."""

        async def statistics() -> Any:
            name, version = request.name or None, request.version or None
            document = self.repository.stats(name, version)
            return json_format.ParseDict(document, pb.ModelStatisticsResponse())

        return await _answer(context, statistics(), pb.ModelStatisticsResponse())

    async def model_infer(self, message: bytes, context: Context) -> bytes:
        """A ``ModelInferRequest``'s bytes to a ``ModelInferResponse``'s: read, run and
        written in worker threads (the quick lane or the CPU lane, by the message's size),
        counted in the model's statistics once its model is known."""
        began, named = time.perf_counter_ns(), list[str]()
        answer = await _answer(context, self._infer(message, named), b"")
        if named:
            # an empty answer is a refusal's (an answer names its model)
            statistics = self.repository.statistics[named[0]]
            statistics.record(bool(answer), time.perf_counter_ns() - began)
        return answer

    async def _infer(self, message: bytes, named: list[str]) -> bytes:
        runtime = self.runtime
        # gRPC has read the whole message: it counts with the posted bodies, until its
        # answer is computed, as a REST body does
        with reserving(runtime.posted) as reservation:
            reservation.take(len(message))
            elements = len(message) // 4  # about four bytes a number
            limit = runtime.limits.json_elements
            served, parsed, answer = await runtime.compute(
                elements, _parse, self.repository, message, limit, named
            )
            # gRPC keeps an answer until its client has read it all, outside the slow
            # clients' budget: one answer is at most a body's size (as a message is)
            runtime.limits.body_bytes.check(
                "the answer's bytes (over gRPC)", answer, hint="ask for more over REST"
            )
            large = answer > handlers.LARGE_ANSWER_BYTES
            # a large answer takes one of the permits until its message is written
            async with handlers.permit(runtime, large):
                work = models.work(len(message), answer)  # the answer's lane
                return await runtime.compute(work, _run, runtime, served, parsed)


def _parse(
    repository: models.Repository, message: bytes, numbers: Limit, named: list[str] | None = None
) -> tuple[models.Model, wire.Request, int]:
    """The message read within its bounds (:mod:`grpc_bounds`, before protobuf builds
    anything): its model (unknown: NOT_FOUND before the inputs are read; known: its name
    appended to ``named``, for its statistics), its request and its answer's bytes. The
    protobuf message itself is not kept, not even by a refusal's traceback."""
    scanned = grpc_bounds.scan(message, numbers)
    decoded = grpc_wire.decode(scanned.header)
    try:
        served = repository.model(decoded.model_name, decoded.model_version or None)
        if named is not None:
            named.append(served.name)
        request = grpc_wire.request(decoded, scanned.raw, numbers)
        return served, request, models.answer_bytes(served, request)
    except ServiceError as exc:
        error = exc
    # the error's traceback holds the frames that hold the decoded message: raised
    # without them, it frees the message at once, not at the next full collection
    del decoded, scanned
    try:
        raise error.with_traceback(None)
    finally:
        del error


def _run(runtime: Runtime, served: models.Model, request: wire.Request) -> bytes:
    outputs, _ = models.infer_parsed(runtime, served, request)
    return grpc_wire.encode(served.name, models.VERSION, request.id, outputs)


def _handler(servicer: Servicer) -> grpc.GenericRpcHandler:
    """The methods served: messages read and written by the protocol's own definitions,
    but ``ModelInfer``'s, which pass as bytes to be read and written off the event loop."""

    def method(behaviour: Callable[..., Any], name: str) -> grpc.RpcMethodHandler[Any, Any]:
        request, response = getattr(pb, name + "Request"), getattr(pb, name + "Response")

        async def bounded(message: bytes, context: Context) -> Any:
            # gRPC takes any message up to PE_MAX_BODY_BYTES, and a deserializer would
            # read it on the event loop: 8 calls at once with a 64 MiB name held 1.2 GB
            # and kept every other call waiting 1.9 s
            if len(message) > SMALL_BYTES:
                context.set_code(grpc.StatusCode.RESOURCE_EXHAUSTED)
                context.set_details(
                    f"the {name}Request's {len(message):,} bytes are over the limit of "
                    f"{SMALL_BYTES:,} (a model's name and version)"
                )
                return response()
            try:
                read = request.FromString(message)
            except DecodeError:
                context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                context.set_details(f"the message is not a {name}Request")
                return response()
            return await behaviour(read, context)

        return grpc.unary_unary_rpc_method_handler(
            bounded, response_serializer=response.SerializeToString
        )

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "ServerLive": method(servicer.server_live, "ServerLive"),
            "ServerReady": method(servicer.server_ready, "ServerReady"),
            "ModelReady": method(servicer.model_ready, "ModelReady"),
            "ServerMetadata": method(servicer.server_metadata, "ServerMetadata"),
            "ModelMetadata": method(servicer.model_metadata, "ModelMetadata"),
            "ModelConfig": method(servicer.model_config, "ModelConfig"),
            "RepositoryIndex": method(servicer.repository_index, "RepositoryIndex"),
            "ModelStatistics": method(servicer.model_statistics, "ModelStatistics"),
            "ModelInfer": grpc.unary_unary_rpc_method_handler(servicer.model_infer),
        },
    )


def concurrent_calls(posted_bytes: int, message: int) -> int:
    """Calls gRPC may hold at once: as many of the largest messages as PE_POSTED_BYTES
    holds, and never fewer than 8 (health checks and small calls beside large ones)."""
    return max(MIN_CALLS, posted_bytes // message)


def address(host: str, port: int) -> str:
    """``host:port`` as gRPC takes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class CannotListen(RuntimeError):
    """The gRPC server cannot listen on ``PE_HOST:PE_GRPC_PORT``."""


@contextlib.asynccontextmanager
async def serving(runtime: Runtime, repository: models.Repository) -> AsyncIterator[None]:
    """The gRPC server of ``repository``'s models on ``PE_HOST:PE_GRPC_PORT`` while the
    context lasts; its calls in flight at the end have ``PE_SHUTDOWN_TIMEOUT`` seconds to
    finish."""
    settings = runtime.settings
    where = address(settings.host, settings.grpc_port)
    message = min(settings.max_body_bytes + HEADER_BYTES, _INT32_MAX)
    server = grpc.aio.server(
        # gRPC reads a whole message (and inflates it) before the service can count it in
        # PE_POSTED_BYTES: calls at once are bounded so that what it holds is too (100
        # calls of 8 MB, 8 KB gzipped, held 26 times a 16 MiB budget); past it a call is
        # RESOURCE_EXHAUSTED at once
        maximum_concurrent_rpcs=concurrent_calls(settings.posted_bytes, message),
        options=[
            # a message over the body limit is refused by gRPC before it is read
            ("grpc.max_receive_message_length", message),
            ("grpc.max_send_message_length", message),
            # several workers share the port (the kernel spreads connections over them);
            # one alone must not share it with another server unawares
            ("grpc.so_reuseport", int(settings.workers > 1)),
        ],
    )
    server.add_generic_rpc_handlers((_handler(Servicer(runtime, repository)),))
    try:
        server.add_insecure_port(where)
    except RuntimeError as exc:
        raise CannotListen(f"PE_GRPC_PORT: cannot listen on {where}: {exc}") from None
    await server.start()
    logger.info("Open Inference Protocol over gRPC on %s", where)
    try:
        yield
    finally:
        await server.stop(settings.shutdown_timeout)

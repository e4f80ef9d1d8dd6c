"""The baselines the service is measured against, each an ASGI app for uvicorn:

- ``constant``: FastAPI endpoints returning constant bytes: the very bytes the service
  sends for each case (the floor for FastAPI itself);
- ``bare``: a bare ASGI callable sending the same bytes (the floor for uvicorn);
- ``naive``: the endpoint a tutorial would write: numpy, then ``table.tolist()`` as JSON;
- ``minimal``: ``np.load`` / ``scale * x + table`` / ``np.save`` for apply, and its JSON
  twin (``orjson.loads`` / ``np.array`` / ``orjson.dumps``).
"""

from __future__ import annotations

import functools
import io
import math
from typing import Any

import numpy as np
import orjson
from fastapi import FastAPI, Request, Response
from starlette.types import Receive, Scope, Send

from service.codecs import json, npy
from service.codecs.types import MEDIA_TYPES
from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey
from service.schemas.sinusoidal import TableQuery

NPY, JSON = MEDIA_TYPES["npy"], MEDIA_TYPES["json"]
TABLE = registry.rows(SinusoidalKey(512), 0, 512)


def _json_bytes() -> bytes:
    fields = TableQuery(max_len=512, d_model=512).describe()
    return json.encode(fields, [TABLE])[1]


BODIES: dict[str, tuple[bytes, str]] = {
    "/npy": (npy.encode([TABLE])[1], NPY),
    "/slice": (npy.encode([TABLE[:8]])[1], NPY),
    "/json": (_json_bytes(), JSON),
    "/empty": (b"", "text/plain"),
    "/healthz": (b"ok", "text/plain"),
}

constant = FastAPI()


def _constant(body: bytes, media_type: str) -> Any:
    async def endpoint() -> Response:
        return Response(body, media_type=media_type)

    return endpoint


for _path, (_body, _media) in BODIES.items():
    constant.add_api_route(_path, _constant(_body, _media), methods=["GET"])


async def bare(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body, media = BODIES.get(scope["path"], (b"", "text/plain"))
    headers = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    status = 304 if scope["path"] == "/empty" else 200
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


naive = FastAPI()
naive.add_api_route("/healthz", _constant(b"ok", "text/plain"), methods=["GET"])


def get_angles(position: Any, k: Any, d_model: int) -> Any:
    """The seeds' code (004, 000): vectorized numpy, float32 exponent."""
    i = k // 2
    angle_rates = 1 / np.power(10000, (2 * i) / np.float32(d_model))
    return position * angle_rates


def positional_encoding(positions: int, d: int) -> Any:
    angle_rads = get_angles(np.arange(positions)[:, np.newaxis], np.arange(d)[np.newaxis, :], d)
    angle_rads[:, 0::2] = np.sin(angle_rads[:, 0::2])
    angle_rads[:, 1::2] = np.cos(angle_rads[:, 1::2])
    return angle_rads.astype(np.float32)


@naive.get("/table")
def naive_table(max_len: int, d_model: int) -> list[list[float]]:
    """The naive endpoint: the seeds' function, then ``tolist()``, typed as FastAPI users
    type it (so FastAPI validates and serializes every float)."""
    return positional_encoding(max_len, d_model).tolist()  # type: ignore[no-any-return]


minimal = FastAPI()
minimal.add_api_route("/healthz", _constant(b"ok", "text/plain"), methods=["GET"])


@functools.cache
def _table(length: int, d_model: int) -> np.ndarray[Any, Any]:
    return registry.rows(SinusoidalKey(d_model), 0, length)


@minimal.post("/apply")
async def minimal_apply(request: Request) -> Response:
    x = np.load(io.BytesIO(await request.body()), allow_pickle=False)
    table = _table(x.shape[-2], x.shape[-1])
    y = math.sqrt(x.shape[-1]) * x + table
    out = io.BytesIO()
    np.save(out, y)
    return Response(out.getvalue(), media_type=NPY)


@minimal.post("/apply-json")
async def minimal_apply_json(request: Request) -> Response:
    x = np.array(orjson.loads(await request.body())["embeddings"], dtype=np.float32)
    table = _table(x.shape[-2], x.shape[-1])
    y = math.sqrt(x.shape[-1]) * x + table
    body = orjson.dumps({"embeddings": y}, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, media_type=JSON)

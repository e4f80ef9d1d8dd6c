"""The one answer (:mod:`service.web.answers`): a plan's format chosen, its limits checked
first, gzip where welcome, an immutable answer's validators and 304, a large answer's
permit held from its encoding until it has been sent."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from typing import Any, Final, cast

import anyio
import httpx
import pytest
from fastapi import FastAPI, Request, Response

from service.codecs.types import Encoded, Format
from service.errors import ClientGone, LimitExceeded, NotAcceptable
from service.metrics import Telemetry
from service.runtime import Runtime
from service.settings import Settings
from service.web import answers
from service.web.answers import Offer, Plan
from tests.support import ROOT, client_of, in_process

JSON_BODY = b'{"data": [' + b"1.0, " * 99 + b"1.0]}"


class Served:
    """An app answering one plan at ``/``, and what its encoder was asked."""

    def __init__(self, **plan: Any) -> None:
        self.runtime = Runtime(Settings(), Telemetry(lambda: None))
        self.encoded: list[tuple[str, bool]] = []
        self.held: list[int] = []
        self.plan = plan
        self.app = FastAPI()
        self.app.add_api_route("/", self.get, methods=["GET"], response_class=Response)

    async def encode(self, fmt: Format, gzipped: bool) -> Encoded:
        self.encoded.append((fmt, gzipped))
        self.held.append(self.runtime.large_answers.value)
        said: Encoded = {"content-type": "application/json"}, JSON_BODY
        if fmt != "json":
            return {"content-type": "application/x-npy"}, b"npy"
        return (
            ({**said[0], "content-encoding": "gzip"}, gzip.compress(JSON_BODY)) if gzipped else said
        )

    async def get(self, request: Request, format: Format | None = None) -> Response:
        offer: Offer[Format] = Offer(("json", "npy"), format)
        plan = Plan(offer, self.encode, **self.plan)
        return await answers.answer(request, self.runtime, plan)


@pytest.fixture
def immutable() -> Iterator[tuple[Served, httpx.Client]]:
    served = Served(elements=100, etag=lambda fmt, gzipped: f'"{fmt}-{gzipped}"', gzip_from=64)
    with in_process(served.app) as http:
        yield served, http


def test_an_immutable_answer_has_its_validators_and_a_304(
    immutable: tuple[Served, httpx.Client],
) -> None:
    served, http = immutable
    answer = http.get("/", headers={"accept-encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["etag"] == '"json-True"'
    assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert answer.headers["vary"] == "Accept, Accept-Encoding"
    assert answer.headers["content-encoding"] == "gzip"
    assert answer.content == JSON_BODY  # httpx decodes it
    unchanged = http.get("/", headers={"accept-encoding": "gzip", "if-none-match": '"json-True"'})
    assert unchanged.status_code == 304
    assert unchanged.headers["etag"] == '"json-True"'
    assert served.encoded == [("json", True)]  # a 304 encodes nothing
    binary = http.get("/?format=npy", headers={"accept-encoding": "gzip"})
    assert binary.headers["etag"] == '"npy-False"'
    assert "vary" not in binary.headers  # named, and not text: nothing to vary on
    by_accept = http.get("/", headers={"accept": "application/x-npy"})
    assert by_accept.headers["vary"] == "Accept"
    assert by_accept.content == b"npy"


def test_a_small_answer_is_not_gzipped(immutable: tuple[Served, httpx.Client]) -> None:
    served, http = immutable
    served.plan["elements"] = 63
    answer = http.get("/", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in answer.headers
    assert answer.headers["vary"] == "Accept, Accept-Encoding"


def test_an_unacceptable_answer_is_refused_before_it_is_encoded(
    immutable: tuple[Served, httpx.Client],
) -> None:
    served, http = immutable
    with pytest.raises(NotAcceptable):
        http.get("/", headers={"accept": "image/png"})
    assert served.encoded == []


def test_the_limits_are_checked_in_the_format_chosen_first() -> None:
    checked: list[str] = []
    served = Served(elements=10**9, check=checked.append, json_hint="ask for npy")
    with in_process(served.app) as http:
        with pytest.raises(LimitExceeded, match="ask for npy"):
            http.get("/")
        assert checked == ["json"]
        assert http.get("/?format=npy").content == b"npy"  # the JSON limit is JSON's
    assert checked == ["json", "npy"]
    assert served.encoded == [("npy", False)]


def test_a_kept_nothing_answer_is_no_store() -> None:
    served = Served(vary=False, headers={"x-said": "1"})
    with in_process(served.app) as http:
        answer = http.get("/", headers={"accept-encoding": "gzip"})
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-said"] == "1"
    assert "vary" not in answer.headers
    assert "etag" not in answer.headers
    assert answer.headers["content-encoding"] == "gzip"  # gzip_from 0: any JSON


@pytest.mark.parametrize(
    "said",
    [
        pytest.param({}, id="untyped"),
        pytest.param({"content-type": "text/plain"}, id="mistyped"),
    ],
)
def test_the_answer_is_typed_by_its_format_alone(said: dict[str, str]) -> None:
    async def encode(fmt: str, gzipped: bool) -> Encoded:
        return {**said, "x-shape": "1"}, b"1"

    async def get(request: Request, format: str | None = None) -> Response:
        offer: Offer[str] = Offer(("json", "png"), format)
        return await answers.answer(request, runtime, Plan(offer, encode, gzip_from=None))

    runtime = Runtime(Settings(), Telemetry(lambda: None))
    app = FastAPI()
    app.add_api_route("/", get, methods=["GET"], response_class=Response)
    with in_process(app) as http:
        for fmt in ("json", "png"):
            answer = http.get(f"/?format={fmt}")
            assert answer.headers.get_list("content-type") == [answers.MEDIA[fmt]]
            # its type before what the encoding says, as a codec's answer lists them
            names = [name for name, _ in answer.headers.multi_items()]
            assert names.index("content-type") < names.index("x-shape")


def test_a_large_answer_holds_its_permit_until_it_has_been_sent() -> None:
    served = Served(large=True)
    with in_process(served.app) as http:
        total = served.runtime.large_answers.value
        assert http.get("/").content == JSON_BODY
        assert served.held == [total - 1]  # taken while it was encoded
        assert served.runtime.large_answers.value == total  # and given back once sent
        served.plan["large"] = False
        http.get("/")
        assert served.held[-1] == total


def test_a_family_whose_query_names_no_format_is_refused_when_declared() -> None:
    """The formats a table is offered in are declared: a query without ``format`` fails
    when the family is declared, not as a request's missing attribute."""
    import dataclasses

    from pydantic import BaseModel

    from service.routes import sinusoidal

    class Formatless(BaseModel):
        max_len: int

    with pytest.raises(TypeError, match="must name its answer's format"):
        dataclasses.replace(cast(Any, sinusoidal.TABLE), query=Formatless)
    assert sinusoidal.TABLE.formats == ("json", "npy", "raw", "safetensors")


JSON: Final = "application/json"
# what a person fills in for the required parameters of a GET that answers arrays (dim 16:
# the 3-D sin-cos tables take multiples of 16; frames, height and width: a patch grid's)
_FILLED: Final[dict[str, int | str]] = {
    "max_len": 4,
    "d_model": 8,
    "head_dim": 8,
    "num_heads": 4,
    "dim": 16,
    "frames": 2,
    "height": 3,
    "width": 4,
    "grid": "2,2,2",
    "model": "qwen2_vl",
}
_COMMITTED: Final = json.loads((ROOT / "openapi" / "openapi.json").read_text())
# every operation whose answer may be arrays or a picture of them (a wire format but JSON)
_ARRAY_MEDIA: Final = set(answers.MEDIA.values()) - {"application/json"}
ARRAYS: Final = sorted(
    (method, path)
    for path, operations in _COMMITTED["paths"].items()
    for method, operation in operations.items()
    if _ARRAY_MEDIA & set(operation["responses"].get("200", {}).get("content", {}))
)


@pytest.mark.parametrize(("method", "path"), ARRAYS)
def test_every_endpoint_that_answers_arrays_is_the_one_answers(
    monkeypatch: pytest.MonkeyPatch, own_in_process_app: httpx.BaseTransport, method: str, path: str
) -> None:
    """Each operation the document says answers arrays or a picture (tables, apply, rows at
    ids, per-layer tables, audits, compare, M-RoPE ids, pictures, inference) is answered
    through :func:`answers.answer`: a new one that answers by itself fails here."""
    served: list[int] = []
    respond = answers._respond

    def counted(*args: Any) -> Response:
        served.append(1)
        return respond(*args)

    monkeypatch.setattr(answers, "_respond", counted)
    operation = _COMMITTED["paths"][path][method]
    query = {
        parameter["name"]: _FILLED[parameter["name"]]
        for parameter in operation.get("parameters", [])
        if parameter.get("required") and parameter["in"] == "query"
    }
    target = path.replace("{name}", "sinusoidal").replace("{version}", "1")
    # the module's own app: no other test has asked these, so none is replayed
    with client_of(own_in_process_app) as http:
        if method == "get":
            answer = http.get(target, params=query)
        else:
            media = operation["requestBody"]["content"]["application/json"]
            body = (
                next(iter(media["examples"].values()))["value"]
                if "examples" in media
                else media["example"]
            )
            example = operation.get("parameters", [])
            query.update(
                {p["name"]: p["example"] for p in example if "example" in p and p["in"] == "query"}
            )
            answer = http.post(
                target, params=query, content=json.dumps(body), headers={"content-type": JSON}
            )
    assert answer.status_code == 200, answer.text
    assert served == [1]


def test_a_large_answer_whose_client_left_as_it_was_encoded_gives_its_permit_back() -> None:
    """The encoding runs in a worker thread, which cannot be stopped: it finishes after its
    client has gone, and the answer it made is dropped (a 499); the permit the answer was
    handed goes back with it, or every large answer after a few such clients waits forever."""

    async def scenario() -> None:
        runtime = Runtime(Settings(), Telemetry(lambda: None))
        total = runtime.large_answers.value
        left, told = anyio.Event(), threading.Event()

        async def receive() -> dict[str, Any]:
            await left.wait()
            told.set()  # the disconnect is seen before the thread's answer comes back
            return {"type": "http.disconnect"}

        def work() -> None:
            anyio.from_thread.run_sync(left.set)  # the client leaves while it runs
            told.wait()

        async def encode(fmt: Format, gzipped: bool) -> Encoded:
            await runtime.compute(1 << 20, work)
            return {"content-type": "application/json"}, JSON_BODY

        scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": []}
        request = Request(scope, receive)
        offer: Offer[Format] = Offer(("json", "npy"), None)
        with pytest.raises(ClientGone):
            await answers.answer(request, runtime, Plan(offer, encode, large=True))
        assert runtime.large_answers.value == total

    anyio.run(scenario)

"""What Swagger UI sends: every parameter with the default the OpenAPI document shows, and
what a person fills in. For every preset, the table, its heatmap and apply answer 200 with
exactly that: the document shows no default that a preset refuses (base, layout). And every
POST's "Try it out" as it comes pre-filled: each example body the document gives, with the
parameters Swagger UI fills from the document alone, is answered with a 2xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import httpx
import numpy as np
import pytest

from service.encodings.catalogue import PRESETS
from tests.support import ROOT, client_of, npy_bytes

FILLED = {"max_len": 4, "d_model": 8}  # what a person types for the required ones


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.fixture(scope="module")
def document(http: httpx.Client) -> dict[str, Any]:
    spec: dict[str, Any] = http.get("/openapi.json").json()
    return spec


def sent(document: dict[str, Any], path: str, method: str, preset: str) -> dict[str, Any]:
    """The query Swagger UI sends: each shown default, the required ones filled in."""
    query = {}
    for parameter in document["paths"][path][method]["parameters"]:
        name = parameter["name"]
        if "default" in parameter["schema"]:
            query[name] = parameter["schema"]["default"]
        elif parameter.get("required"):
            query[name] = FILLED[name]
    return {**query, "preset": preset}


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_table_with_swaggers_defaults_is_served(
    http: httpx.Client, document: dict[str, Any], preset: str
) -> None:
    path = "/v1/encodings/sinusoidal"
    answer = http.get(path, params=sent(document, path, "get", preset))
    assert answer.status_code == 200, answer.text


# every preset's table is served in the fast loop; a picture of each is drawn in the full
# run, of the first in the fast loop
@pytest.mark.parametrize(
    "preset",
    [pytest.param(p, marks=pytest.mark.slow) if i else p for i, p in enumerate(PRESETS)],
)
def test_the_heatmap_with_swaggers_defaults_is_drawn(
    http: httpx.Client, document: dict[str, Any], preset: str
) -> None:
    path = "/v1/encodings/sinusoidal/heatmap.png"
    answer = http.get(path, params=sent(document, path, "get", preset))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"


@pytest.mark.parametrize("preset", list(PRESETS))
def test_apply_with_swaggers_defaults_is_served(
    http: httpx.Client, document: dict[str, Any], preset: str
) -> None:
    path = "/v1/encodings/sinusoidal/apply"
    answer = http.post(
        path,
        params=sent(document, path, "post", preset),
        content=npy_bytes(np.zeros((4, 8), np.float32)),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text


def test_every_route_is_tagged_by_its_resource(document: dict[str, Any]) -> None:
    tags = {
        path: operation.get("tags")
        for path, operations in document["paths"].items()
        for operation in operations.values()
    }
    assert not [path for path, tagged in tags.items() if not tagged]
    assert tags["/v1/encodings/rotary/from-config"] == ["rotary"]
    assert tags["/v1/biases/alibi/slopes"] == ["alibi"]
    for family in ("sinusoidal", "rotary", "ALiBi"):
        assert family in document["info"]["description"]


# the POST operations, by id, of the committed document (tests/test_openapi.py keeps it the
# app's): parametrized without building an app at collection
_COMMITTED: Final = json.loads((ROOT / "openapi" / "openapi.json").read_text())
POSTS: Final = {
    operation["operationId"]: (path, operation)
    for path, operations in _COMMITTED["paths"].items()
    for method, operation in operations.items()
    if method == "post"
}
_ABSENT: Final = object()


def filled(parameter: dict[str, Any]) -> Any:
    """What Swagger UI's "Try it out" puts in a parameter's field (its ParameterRow): the
    first of its examples, its example, its schema's (the first of ``anyOf`` merged in)
    example or default, else its own default; ``_ABSENT`` when none."""
    schema = parameter.get("schema", {})
    merged = {**schema, **(schema.get("anyOf") or [{}])[0]}
    if parameter.get("examples"):
        return next(iter(parameter["examples"].values()))["value"]
    for found in (
        parameter.get("example", _ABSENT),
        merged.get("example", _ABSENT),
        merged.get("default", _ABSENT),
        parameter.get("default", _ABSENT),
    ):
        if found is not _ABSENT:
            return found
    return _ABSENT


def bodies(media: dict[str, Any]) -> list[Any]:
    """A media type's example bodies, as Swagger UI offers them."""
    if "examples" in media:
        return [example["value"] for example in media["examples"].values()]
    return [media["example"]] if "example" in media else []


@pytest.mark.parametrize("operation_id", sorted(POSTS))
def test_every_posts_prefilled_example_is_answered(
    http: httpx.Client, document: dict[str, Any], operation_id: str
) -> None:
    """Swagger UI pre-fills the body with the first media type's example (else one made
    from the schema, which the service refuses) and every parameter it can: each example is
    sent as it is, and answered with a 2xx. A JSON body always has one; a binary one (an
    .npy) cannot be pre-filled, and is chosen by a person."""
    path, _ = POSTS[operation_id]
    operation = document["paths"][path]["post"]
    query, target = {}, path
    for parameter in operation.get("parameters", []):
        value = filled(parameter)
        if value is _ABSENT:
            assert not parameter.get("required"), f"{parameter['name']} is left blank"
            continue
        if parameter["in"] == "path":
            target = target.replace("{" + parameter["name"] + "}", str(value))
        else:
            query[parameter["name"]] = value
    content = operation["requestBody"]["content"]
    first = next(iter(content))
    shown = {media_type: bodies(media) for media_type, media in content.items()}
    assert shown[first], f"{first}: Swagger UI would make a body from the schema"
    assert all(shown[t] for t in content if t.endswith("json")), shown.keys()
    for media_type, examples in shown.items():
        for body in examples:
            answer = http.post(
                target,
                params=query,
                content=json.dumps(body),
                headers={"content-type": media_type},
            )
            assert 200 <= answer.status_code < 300, (media_type, answer.text)


def test_every_example_is_an_operations() -> None:
    """An example names an operation of the document: none is left behind by a rename."""
    from service.web.examples import EXAMPLES

    assert set(EXAMPLES) <= set(POSTS)

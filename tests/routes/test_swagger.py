"""What Swagger UI sends: every parameter with the default the OpenAPI document shows, and
what a person fills in. For every preset, the table, its heatmap and apply answer 200 with
exactly that: the document shows no default that a preset refuses (base, layout)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.app import create_app
from service.encodings.catalogue import PRESETS
from service.settings import Settings
from tests.support import in_process, npy_bytes

FILLED = {"max_len": 4, "d_model": 8}  # what a person types for the required ones


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with in_process(create_app(Settings())) as client:
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


@pytest.mark.parametrize("preset", list(PRESETS))
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

"""The committed OpenAPI document is the app's, and it says what clients need."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.schemas.presets import PRESET_PARAMETERS
from tests.support import ROOT, openapi_document

SPEC_FILE = ROOT / "openapi" / "openapi.json"
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SPEC_FILE.read_text())
    return document


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def test_the_committed_document_is_the_apps(spec: dict[str, Any]) -> None:
    """Regenerate with: .venv/bin/python -m service openapi > openapi/openapi.json"""
    assert openapi_document() == spec


def test_every_operation_has_a_stable_id_and_a_summary(spec: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    assert all(op["operationId"].isidentifier() for _, _, op in operations(spec))
    assert all(op["summary"] for _, _, op in operations(spec))
    assert set(ids) >= {"getSinusoidalTable", "applySinusoidal", "getCacheStats", "getMetrics"}


def test_the_table_operation(spec: dict[str, Any]) -> None:
    op = spec["paths"]["/v1/encodings/sinusoidal"]["get"]
    assert set(op["responses"]["200"]["content"]) == {
        "application/json",
        "application/x-npy",
        "application/octet-stream",
        "application/x-safetensors",
    }
    assert {"ETag", "X-Shape", "X-Dtype"} <= set(op["responses"]["200"]["headers"])
    for status in ("406", "422"):
        assert PROBLEM in op["responses"][status]["content"]
    bounds = {p["name"]: p["schema"] for p in op["parameters"]}
    assert bounds["max_len"]["minimum"] == bounds["d_model"]["minimum"] == 1
    assert bounds["base"]["exclusiveMinimum"] == 1
    assert bounds["start"]["minimum"] == bounds["dim_start"]["minimum"] == 0
    assert bounds["dtype"]["enum"] == ["float32", "float64", "float16"]


def test_the_apply_operation(spec: dict[str, Any]) -> None:
    op = spec["paths"]["/v1/encodings/sinusoidal/apply"]["post"]
    assert set(op["requestBody"]["content"]) == {
        "application/json",
        "application/x-npy",
        "application/x-npz",
        "application/x-safetensors",
        "application/octet-stream",
    }
    assert set(op["responses"]["200"]["content"]) == {
        "application/json",
        "application/x-npy",
        "application/x-npz",
        "application/octet-stream",
        "application/x-safetensors",
    }
    for status in ("400", "406", "408", "413", "415", "422"):
        assert PROBLEM in op["responses"][status]["content"]
    assert {p["name"] for p in op["parameters"]} == {
        "base",
        "layout",
        "scale",
        "offset",
        "max_len",
        "format",
        "shape",
        "dtype",
        "preset",
        "rounding",
        *PRESET_PARAMETERS,
    }


def test_every_reference_resolves(spec: dict[str, Any]) -> None:
    """A ``$ref`` that points nowhere (a model's own ``$defs`` copied into a request body)
    stops Redoc from drawing the page at all."""
    references: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                references.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(spec)
    assert references
    schemas = spec["components"]["schemas"]
    prefix = "#/components/schemas/"
    assert all(ref.startswith(prefix) and ref.removeprefix(prefix) in schemas for ref in references)


def test_every_operation_documents_what_the_protocol_refuses(spec: dict[str, Any]) -> None:
    """A request line over 8 KiB is a 414 and a head over 32 KiB a 431, whatever its path,
    before any route reads it (an audit's ``bands`` string made schemathesis find a 414
    that no operation documented)."""
    for path, method, op in operations(spec):
        for status in ("414", "431"):
            response = op["responses"].get(status)
            assert response is not None, f"{method.upper()} {path} does not document {status}"
            assert PROBLEM in response["content"]

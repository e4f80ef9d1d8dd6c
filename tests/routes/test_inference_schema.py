"""The service's ``/v2`` answers are the protocol's, checked against KServe's own
statements of it: the pydantic data models of KServe's Python server (``kserve`` 0.21.0
from PyPI, the release the package index has, installed by ``.ci/run`` without its
dependencies: the one module read needs pydantic alone),
and the protocol's published OpenAPI document (``docs/predict-api/v2/rest_predict_v2.yaml``
of KServe v0.20.0, read from the steering repository's reference folder: fetched files are
not kept here; skipped where it is absent, naming where it was looked for)."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import httpx
import jsonschema
import numpy as np
import pytest
import yaml

from service.app import create_app
from service.inference.models import Repository
from service.routes import FAMILIES
from service.settings import Settings
from tests.support import KSERVE_REFERENCE_VARIABLE, KSERVE_RELEASE, in_process, kserve_reference

MODELS: Final = list(Repository.of(FAMILIES).models)
SPEC: Final = "rest_predict_v2.yaml"
SPEC_SHA256: Final = "8106eb3dda1e3c824fa1e8aa4011c458360b6a6b5ac5a1eecae857ebd05844b8"


def tensor(name: str, values: list[Any], datatype: str, shape: list[int]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": values}


# one small request each model answers, JSON in and out
REQUESTS: Final[dict[str, dict[str, Any]]] = {
    "sinusoidal": {
        "inputs": [tensor("positions", [0, 5], "INT64", [2])],
        "parameters": {"d_model": 4},
    },
    "rotary": {
        "inputs": [tensor("positions", [0, 7], "INT32", [2])],
        "parameters": {"head_dim": 8},
    },
    "alibi-slopes": {"inputs": [], "parameters": {"num_heads": 4}},
    "alibi": {
        "inputs": [],
        "parameters": {"num_heads": 2, "max_len": 3, "key_len": 3, "form": "symmetric"},
    },
    "temperature": {"inputs": [tensor("positions", [0, 9000], "INT64", [2])]},
    "timestep": {
        "inputs": [tensor("positions", [999.0, 0.5], "FP32", [2])],
        "parameters": {"dim": 8},
    },
    "sincos-2d": {
        "inputs": [tensor("positions", [0, 3], "INT64", [2])],
        "parameters": {"height": 2, "width": 2, "dim": 8},
    },
    "sincos-3d": {
        "inputs": [tensor("positions", [0, 3], "INT64", [2])],
        "parameters": {"frames": 1, "height": 2, "width": 2, "dim": 16},
    },
    "rope-nd": {
        "inputs": [tensor("positions", [0, 1, 0, 1, 2, 3], "FP32", [3, 2])],
        "parameters": {"preset": "flux", "grid": "2,2"},
    },
    "vision-rotary": {
        "inputs": [tensor("positions", [0, 1, 1, 0], "INT64", [2, 2])],
        "parameters": {"model": "pixtral", "grid": "2,2"},
    },
    "sinusoidal-apply": {
        "inputs": [tensor("embeddings", [0.5] * 8, "FP32", [1, 2, 4])],
        "parameters": {"max_len": 2},
    },
    "rotary-apply": {
        "inputs": [tensor("embeddings", [0.5] * 8, "FP32", [1, 1, 8])],
        "parameters": {"max_len": 1},
    },
    "rope-nd-apply": {
        "inputs": [tensor("embeddings", [0.25] * 512, "FP32", [1, 1, 4, 128])],
        "parameters": {"preset": "flux", "grid": "2,2"},
    },
    "vision-rotary-apply": {
        "inputs": [tensor("embeddings", [0.25] * 256, "FP32", [1, 1, 4, 64])],
        "parameters": {"model": "pixtral", "grid": "2,2"},
    },
}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with in_process(create_app(Settings())) as client:
        yield client


def exchanges(http: httpx.Client) -> list[tuple[str, str, httpx.Response, Any]]:
    """Each call the protocol states, as a client would make it, by the published path:
    ``(method, path, answer, request body)``, answers good and bad."""
    calls: list[tuple[str, str, Any]] = [
        ("GET", "/v2/health/live", None),
        ("GET", "/v2/health/ready", None),
        ("GET", "/v2/", None),
        ("GET", "/v2/models/no-such-model/versions/1", None),
        ("POST", "/v2/models/no-such-model/versions/1/infer", REQUESTS["rotary"]),
        ("POST", "/v2/models/rotary/versions/1/infer", {"inputs": "none"}),
        (
            "POST",
            "/v2/models/rotary/versions/1/infer",
            {**REQUESTS["rotary"], "parameters": {"head_dim": 7}},
        ),
        ("GET", "/v2/models/rotary/versions/2", None),
    ]
    for name in MODELS:
        calls.append(("GET", f"/v2/models/{name}/versions/1/ready", None))
        calls.append(("GET", f"/v2/models/{name}/versions/1", None))
        calls.append(("POST", f"/v2/models/{name}/versions/1/infer", {**REQUESTS[name], "id": "7"}))
        calls.append(("POST", f"/v2/models/{name}/versions/1/infer", REQUESTS[name]))
    found = []
    for method, path, body in calls:
        answer = http.request(method, path, json=body)
        found.append((method, path, answer, body))
    return found


def test_every_model_has_a_request_here() -> None:
    assert set(REQUESTS) == set(MODELS)


def v2_datamodels() -> ModuleType:
    """KServe's ``kserve/protocol/rest/v2_datamodels.py`` by itself (``import kserve``
    would load its server and Kubernetes' client)."""
    found = importlib.util.find_spec("kserve")
    assert found is not None, "kserve is not installed: .ci/run installs 0.21.0 with --no-deps"
    assert found.submodule_search_locations
    path = Path(next(iter(found.submodule_search_locations))) / "protocol/rest/v2_datamodels.py"
    spec = importlib.util.spec_from_file_location("kserve_v2_datamodels", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_answers_are_kserve_s_data_models(http: httpx.Client) -> None:
    """Each answer is what KServe's server would answer, by its own pydantic models: server
    and model metadata, and every model's JSON infer answer (with the request's id or
    ``""``); each request sent is KServe's InferenceRequest."""
    kserve = v2_datamodels()
    checked = set()
    for _method, path, answer, body in exchanges(http):
        if body is not None and isinstance(body.get("inputs"), list) and body["inputs"]:
            kserve.InferenceRequest.model_validate(body)
        if answer.status_code != 200 or not answer.content:
            continue
        if path == "/v2/":
            kserve.ServerMetadataResponse.model_validate(answer.json())
        elif path.endswith("/infer"):
            document = answer.json()
            kserve.InferenceResponse.model_validate(document)
            assert document["id"] == body.get("id", "")
            checked.add(path)
        else:
            kserve.ModelMetadataResponse.model_validate(answer.json())
    assert len(checked) == len(MODELS)


@pytest.fixture(scope="module")
def published() -> dict[str, Any]:
    """KServe's published OpenAPI document of the protocol, checked to be its release's."""
    path = kserve_reference() / SPEC
    if not path.is_file():
        pytest.skip(
            f"KServe {KSERVE_RELEASE}'s {SPEC} is not at {path} (set ${KSERVE_REFERENCE_VARIABLE} "
            "to a folder that has it): docs/predict-api/v2/ of github.com/kserve/kserve at that tag"
        )
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SPEC_SHA256, (
        f"{path} is not KServe {KSERVE_RELEASE}'s"
    )
    return yaml.safe_load(data)  # type: ignore[no-any-return]


def operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The published operation whose path template (``${MODEL_NAME}``, ...) matches."""
    for template, item in document["paths"].items():
        pattern = re.sub(r"\\\$\\\{[A-Z_]+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path) and method.lower() in item:
            return item[method.lower()]  # type: ignore[no-any-return]
    raise AssertionError(f"{method} {path} is not in {SPEC}")


def test_the_answers_validate_against_the_published_schema(
    http: httpx.Client, published: dict[str, Any]
) -> None:
    """Every call the document states answers a status it names (a 4xx where it names
    400), with a body its schema for that status takes: JSON answers whole (a binary
    answer's outputs have no ``data``, which the schema requires)."""
    components = published["components"]
    validated = 0
    for method, path, answer, _ in exchanges(http):
        responses = operation(published, method, path)["responses"]
        status = str(answer.status_code)
        if status in responses:
            content = responses[status].get("content")
            if content is None:
                continue
            schema = content["application/json"]["schema"]
        else:
            # an error where the document names none: its 400's, or its own error shape
            # of a model's metadata (a component no operation names)
            assert answer.status_code >= 400, (path, status, list(responses))
            fallback = {"$ref": "#/components/schemas/metadata_model_error_response"}
            content = responses.get("400", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema", fallback)
        root = {"components": components, "allOf": [schema]}
        jsonschema.Draft4Validator(root).validate(answer.json())
        validated += 1
    # server metadata, two answers a model and its metadata, and the errors
    assert validated >= 1 + 3 * len(MODELS) + 3


def test_a_binary_answer_s_header_is_the_schema_s_but_data(
    http: httpx.Client, published: dict[str, Any]
) -> None:
    """With the binary extension, each output's ``data`` is its bytes after the header:
    the header is the published answer with ``binary_data_size`` in place of data."""
    body = {**REQUESTS["rotary"], "parameters": {"head_dim": 8, "binary_data_output": True}}
    answer = http.post("/v2/models/rotary/infer", json=body)
    length = int(answer.headers["inference-header-content-length"])
    header = yaml.safe_load(answer.content[:length])
    schema = published["components"]["schemas"]["response_output"]
    for output in header["outputs"]:
        size = output["parameters"]["binary_data_size"]
        assert size == 4 * int(np.prod(output["shape"]))
        output["data"] = []
        jsonschema.Draft4Validator({"components": published["components"], **schema}).validate(
            output
        )

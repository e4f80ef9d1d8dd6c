"""The Open Inference Protocol's REST wire byte by byte: health, metadata, the binary data
extension's framing, and every refusal in the protocol's ``{"error": ...}`` shape with the
status the protocol gives it; in process and against a real server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service.errors import InvalidInput
from service.inference import models, wire
from service.routes import FAMILIES
from tests.support import TABLE, load

INFER = "/v2/models/sinusoidal/infer"
APPLY = "/v2/models/sinusoidal-apply/infer"


def binary_request(
    header: dict[str, Any], *arrays: np.ndarray[Any, Any], length: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """``header`` as JSON followed by ``arrays``' bytes, with its length in the header."""
    head = orjson.dumps(header)
    return head + b"".join(a.tobytes() for a in arrays), {
        "inference-header-content-length": length if length is not None else str(len(head))
    }


def positions(data: Any, shape: list[int] | None = None, datatype: str = "INT64") -> Any:
    return {"name": "positions", "shape": shape or [len(data)], "datatype": datatype, "data": data}


def infer(http: httpx.Client, *inputs: Any, path: str = INFER, **parameters: Any) -> httpx.Response:
    return http.post(path, json={"inputs": list(inputs), "parameters": parameters})


def assert_error(response: httpx.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert list(document) == ["error"]
    for word in words:
        assert word in document["error"]
    return str(document["error"])


def test_server_and_health(api: httpx.Client) -> None:
    server = api.get("/v2").json()
    assert server["name"] == "positional-encodings"
    assert server["extensions"] == ["binary_tensor_data"]
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/sinusoidal/ready"):
        response = api.get(path)
        assert (response.status_code, response.content) == (200, b"")
    assert_error(api.get("/v2/models/nope/ready"), 404, "nope")
    assert_error(api.get("/v2/models/sinusoidal/versions/7"), 404, "version")
    assert api.get("/v2/models/sinusoidal/versions/1").json()["name"] == "sinusoidal"


def test_framework_errors_take_the_protocol_shape(api: httpx.Client) -> None:
    assert_error(api.get("/v2/models/sinusoidal/nothing"), 404)
    response = api.get(INFER)
    assert_error(response, 405, "GET")
    assert "POST" in response.headers["allow"]
    # and v1 keeps its problem documents
    assert api.get("/v1/nothing").headers["content-type"] == "application/problem+json"


def test_json_rows_and_the_id_come_back(api: httpx.Client) -> None:
    request = {
        "id": "r-1",
        "inputs": [positions([[2, 3], [0, 1]], shape=[4])],
        "parameters": {"d_model": 6},
    }
    answer = api.post(INFER, json=request).json()
    table = load(api.get(TABLE, params={"max_len": 4, "d_model": 6}))
    assert answer["id"] == "r-1"
    (output,) = answer["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("encodings", "FP32", [4, 6])
    np.testing.assert_array_equal(
        np.array(output["data"], np.float32).reshape(4, 6), table[[2, 3, 0, 1]]
    )


def test_binary_in_and_out_by_the_request_parameter(api: httpx.Client) -> None:
    ids = np.array([5, 1], np.int32)
    header = {
        "inputs": [
            {
                "name": "positions",
                "shape": [2],
                "datatype": "INT32",
                "parameters": {"binary_data_size": 8},
            }
        ],
        "parameters": {"d_model": 4, "dtype": "float64", "binary_data_output": True},
    }
    body, headers = binary_request(header, ids)
    response = api.post(INFER, content=body, headers=headers)
    assert response.headers["content-type"] == "application/octet-stream"
    length = int(response.headers["inference-header-content-length"])
    document = orjson.loads(response.content[:length])
    (output,) = document["outputs"]
    assert output["parameters"] == {"binary_data_size": 2 * 4 * 8}
    rows = np.frombuffer(response.content[length:], "<f8").reshape(2, 4)
    table = load(api.get(TABLE, params={"max_len": 6, "d_model": 4, "dtype": "float64"}))
    np.testing.assert_array_equal(rows, table[[5, 1]])


def test_empty_positions_give_no_rows(api: httpx.Client) -> None:
    answer = infer(api, positions([], shape=[0]), d_model=8).json()
    assert answer["outputs"][0]["shape"] == [0, 8]


BAD_JSON_REQUESTS = [
    (b"not json", ["not valid JSON"]),
    (b"[1, 2]", ["JSON object"]),
    (orjson.dumps({"inputs": []}), ["positions", "required input"]),
    (orjson.dumps({"inputs": [positions([1])], "extra": 1}), ["extra"]),
    (orjson.dumps({"inputs": [positions([1]), positions([2])]}), ["twice"]),
    (orjson.dumps({"inputs": [positions([1], datatype="BYTES")]}), ["BYTES", "INT64"]),
    (orjson.dumps({"inputs": [positions([1], datatype="FP32")]}), ["FP32", "INT64 or INT32"]),
    (orjson.dumps({"inputs": [positions([1], shape=[-1])]}), ["shape"]),
    (orjson.dumps({"inputs": [positions([1, 2, 3], shape=[2])]}), ["3", "2"]),
    (orjson.dumps({"inputs": [positions([[1, 2], [3]], shape=[3])]}), ["ragged"]),
    (orjson.dumps({"inputs": [positions([1.5])]}), ["integers"]),
    (orjson.dumps({"inputs": [positions([2**40], datatype="INT32")]}), ["INT32 range"]),
    (orjson.dumps({"inputs": [positions([-1])], "parameters": {"d_model": 4}}), ["non-negative"]),
    (
        orjson.dumps({"inputs": [positions([[1]], shape=[1, 1])], "parameters": {"d_model": 4}}),
        ["[-1]"],
    ),
    (
        orjson.dumps({"inputs": [positions([2**31])], "parameters": {"d_model": 4}}),
        ["PE_MAX_POSITION"],
    ),
    (orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": "wide"}}), ["d_model"]),
    # the protocol's parameters are typed: no boolean or string is read as a number
    (orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": True}}), ["d_model"]),
    (orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": "8"}}), ["d_model"]),
    (orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": 8.5}}), ["d_model"]),
    (
        orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": 4, "preset": "x"}}),
        ["preset"],
    ),
    (
        orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": 4, "padding_idx": 1}}),
        ["padding_idx"],
    ),
    (
        orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": 1 << 20}}),
        ["PE_MAX_WIDTH"],
    ),
    (orjson.dumps({"inputs": [positions([1])], "id": 5, "parameters": {"d_model": 4}}), ["id"]),
    (
        orjson.dumps(
            {"inputs": [positions([1])], "parameters": {"d_model": 4, "binary_data_output": 1}}
        ),
        ["binary_data_output"],
    ),
    (
        orjson.dumps(
            {"inputs": [positions([1])], "outputs": [{"name": "x"}], "parameters": {"d_model": 4}}
        ),
        ["x"],
    ),
]


def asking(**fields: Any) -> bytes:
    """A sinusoidal request of one position with ``fields`` beside its inputs."""
    return orjson.dumps({"inputs": [positions([1])], "parameters": {"d_model": 4}, **fields})


# found by a hostile client (issue 23): each was answered 200
HOSTILE_REQUESTS = [
    pytest.param(asking(outputs=[]), ["outputs", "at least one", "left out"], id="no-outputs"),
    pytest.param(
        asking(outputs=[{"name": "encodings"}] * (wire.MAX_OUTPUTS + 1)),
        ["outputs", "9 entries", "at most 8"],
        id="too-many-outputs",
    ),
    pytest.param(
        asking(outputs=[{"name": "encodings"}, {"name": "encodings"}]),
        ["outputs[1].name", "twice"],
        id="an-output-twice",
    ),
    pytest.param(asking(id="i" * 1025), ["id", "1,025 UTF-8 bytes", "1,024"], id="long-id"),
    # the bound is on UTF-8 bytes, not characters: 513 of them, two bytes each
    pytest.param(asking(id="é" * 513), ["id", "1,026 UTF-8 bytes"], id="long-utf8-id"),
]


@pytest.mark.parametrize(("body", "words"), [*BAD_JSON_REQUESTS, *HOSTILE_REQUESTS])
def test_bad_requests_are_400s_that_say_why(
    api: httpx.Client, body: bytes, words: list[str]
) -> None:
    assert_error(api.post(INFER, content=body), 400, *words)


def test_binary_framing_is_checked(api: httpx.Client) -> None:
    spec = {
        "name": "positions",
        "shape": [3],
        "datatype": "INT64",
        "parameters": {"binary_data_size": 24},
    }
    header = {"inputs": [spec], "parameters": {"d_model": 4}}
    ids = np.arange(3, dtype=np.int64)
    body, headers = binary_request(header, ids)
    assert api.post(INFER, content=body, headers=headers).status_code == 200
    # the sizes and the body disagree, each way
    assert_error(api.post(INFER, content=body + b"x", headers=headers), 400, "25", "24")
    assert_error(api.post(INFER, content=body[:-1], headers=headers), 400, "23")
    # a size that is not the shape's
    wrong = {**header, "inputs": [{**spec, "parameters": {"binary_data_size": 16}}]}
    body, headers = binary_request(wrong, ids[:2])
    assert_error(api.post(INFER, content=body, headers=headers), 400, "16", "24")
    # data beside a binary size
    both = {**header, "inputs": [{**spec, "data": [0, 1, 2]}]}
    body, headers = binary_request(both, ids)
    assert_error(api.post(INFER, content=body, headers=headers), 400, "binary_data_size")
    # the header's length: past the body, or not a number
    for length in (str(10**6), "12a", "-1", "9" * 40):
        body, headers = binary_request(header, ids, length=length)
        assert_error(
            api.post(INFER, content=body, headers=headers), 400, "Inference-Header-Content-Length"
        )


def test_a_compressed_body_is_refused(api: httpx.Client) -> None:
    response = api.post(INFER, content=b"\x1f\x8b", headers={"content-encoding": "gzip"})
    assert_error(response, 415, "gzip")


def test_apply_errors(api: httpx.Client) -> None:
    flat = {"name": "embeddings", "shape": [4], "datatype": "FP32", "data": [0, 1, 2, 3]}
    assert_error(api.post(APPLY, json={"inputs": [flat]}), 400, "embeddings", "2-D")
    grid = {**flat, "shape": [2, 2]}
    bad_ids = {"name": "position_ids", "shape": [3], "datatype": "INT64", "data": [0, 1, 2]}
    assert_error(api.post(APPLY, json={"inputs": [grid, bad_ids]}), 400, "position_ids")
    assert_error(api.post(APPLY, json={"inputs": [bad_ids]}), 400, "embeddings", "required")
    huge = {**grid, "data": [1e300, 0, 0, 0], "datatype": "FP16"}
    assert_error(api.post(APPLY, json={"inputs": [huge]}), 400, "float16 range")


def test_limits_are_named(small_api: httpx.Client) -> None:
    # the small server: PE_MAX_BODY_BYTES 100,000, PE_MAX_ELEMENTS 100,000, JSON 1,000
    assert_error(small_api.post(INFER, content=b" " * 100_001), 413, "PE_MAX_BODY_BYTES")
    many = list(range(1_001))
    assert_error(infer(small_api, positions(many), d_model=4), 400, "PE_MAX_JSON_ELEMENTS")
    ids = np.zeros(2_000, np.int64)
    spec = {
        "name": "positions",
        "shape": [2_000],
        "datatype": "INT64",
        "parameters": {"binary_data_size": 16_000},
    }
    body, headers = binary_request({"inputs": [spec], "parameters": {"d_model": 64}}, ids)
    assert_error(small_api.post(INFER, content=body, headers=headers), 400, "PE_MAX_ELEMENTS")
    body, headers = binary_request({"inputs": [spec], "parameters": {"d_model": 4}}, ids)
    assert_error(small_api.post(INFER, content=body, headers=headers), 400, "binary_data")
    binary = {"inputs": [spec], "parameters": {"d_model": 4, "binary_data_output": True}}
    body, headers = binary_request(binary, ids)
    assert small_api.post(INFER, content=body, headers=headers).status_code == 200


def test_nesting_is_bounded_before_parsing(small_api: httpx.Client) -> None:
    # nested empty lists cost 2 bytes each in the body and some 60 once parsed: counted
    nested = b"[" * 600 + b"]" * 600
    body = b'{"inputs": [' + b",".join([nested] * 2) + b"]}"
    assert_error(
        small_api.post(INFER, content=body), 400, "lists and objects", "PE_MAX_JSON_ELEMENTS"
    )
    apply = b'{"embeddings": [[1.0]], "position_ids": [' + nested + b"," + nested + b"]}"
    response = small_api.post(
        "/v1/encodings/sinusoidal/apply",
        content=apply,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert "lists and objects" in response.json()["detail"]


@pytest.mark.parametrize(
    "shape",
    [[0, 2**62, 2**62], [0, 2**63], [2**40, 2**40, 0]],
    ids=["zero-first", "huge", "zero-last"],
)
@pytest.mark.parametrize("binary", [True, False])
def test_a_shape_no_array_can_hold_is_refused(
    api: httpx.Client, shape: list[int], binary: bool
) -> None:
    spec: dict[str, Any] = {"name": "embeddings", "shape": shape, "datatype": "FP32"}
    if binary:
        spec["parameters"] = {"binary_data_size": 0}
        body, headers = binary_request({"inputs": [spec]})
    else:
        body, headers = orjson.dumps({"inputs": [{**spec, "data": []}]}), {}
    assert_error(api.post(APPLY, content=body, headers=headers), 400, "embeddings.shape")


def test_odd_header_lengths_and_many_inputs(api: httpx.Client) -> None:
    for length in (b"\xb2", b"1\xb3"):  # digits to str.isdigit, not to int()
        response = api.post(
            INFER, content=b"{}", headers=[(b"inference-header-content-length", length)]
        )
        assert_error(response, 400, "Inference-Header-Content-Length")
    many = [positions([1]) | {"name": f"p{i}"} for i in range(100)]
    assert_error(infer(api, *many, d_model=4), 400, "inputs", "at most")


def test_echoed_names_are_cut_short(api: httpx.Client) -> None:
    name = "m" * 5_000
    assert len(assert_error(api.post(f"/v2/models/{name}/infer", json={}), 404)) < 300
    long_input = positions([1]) | {"name": "x" * 20_000}
    assert len(assert_error(infer(api, long_input, d_model=4), 400)) < 300
    parameters = {"d_model": 4, "y" * 20_000: 1}
    response = api.post(INFER, json={"inputs": [positions([1])], "parameters": parameters})
    assert len(assert_error(response, 400)) < 600


def test_the_header_s_objects_are_bounded_before_parsing(api: httpx.Client) -> None:
    """Parsed objects are a header's costly part (2M outputs entries in 40 MiB took seconds
    and some 600 MiB): their braces are counted first, within PE_MAX_JSON_ELEMENTS."""
    many = asking(outputs=[{"name": "encodings"}] * wire.MAX_OBJECTS)
    error = assert_error(api.post(INFER, content=many), 400, "4,096", "strings")
    assert "4,099" in error  # the request's, its parameters', its input's and the outputs'
    # braces in a string count too, and the refusal says so
    braces = asking(id="{" * wire.MAX_OBJECTS)
    assert_error(api.post(INFER, content=braces), 400, "'{'", "inside strings")
    # strings too: 2M parameter names cost 0.7 s and 92 MiB, 2M output names 176 MiB
    names = {"d_model": 4, **{f"p{i}": 0 for i in range(wire.MAX_QUOTES // 2)}}
    strings = json.dumps({"inputs": [positions([1])], "parameters": names}).encode()
    assert_error(api.post(INFER, content=strings), 400, "16,384", "'\"'")
    # and those of a binary request's header only, not its tensors' bytes
    spec = {"name": "positions", "shape": [8_000], "datatype": "INT64"}
    ids = np.full(8_000, ord("{"), np.int64)
    header = {"inputs": [spec | {"parameters": {"binary_data_size": ids.nbytes}}]}
    body, headers = binary_request({**header, "parameters": {"d_model": 4}}, ids)
    assert api.post(INFER, content=body, headers=headers).status_code == 200


def test_ids_and_outputs_at_their_limits_are_answered(api: httpx.Client) -> None:
    for request_id in ("i" * wire.MAX_ID_BYTES, "é" * (wire.MAX_ID_BYTES // 2)):
        answer = api.post(INFER, content=asking(id=request_id)).json()
        assert answer["id"] == request_id
    # an output named once per entry, up to MAX_OUTPUTS of them, is still an answer
    answer = api.post(INFER, content=asking(outputs=[{"name": "encodings"}])).json()
    assert [output["name"] for output in answer["outputs"]] == ["encodings"]


@pytest.mark.parametrize(
    ("check", "value", "words"),
    [
        pytest.param(wire.check_outputs, wire.MAX_OUTPUTS + 1, ["outputs", "9"], id="outputs"),
        pytest.param(wire.check_id, 1_025, ["id", "1,025"], id="id"),
    ],
)
def test_the_wire_checks_the_grpc_wire_shares(check: Any, value: Any, words: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        check(value)
    for word in words:
        assert word in caught.value.detail
    wire.check_outputs(wire.MAX_OUTPUTS)  # at the limits: no refusal
    wire.check_outputs(0)  # none asked: all, on the gRPC wire
    wire.check_id(wire.MAX_ID_BYTES)


def test_the_answer_s_size_counts_the_echoed_id() -> None:
    """The gRPC answer limit reads answer_bytes before the run: the id is echoed in it."""
    ids = wire.Tensor("positions", "INT64", np.arange(3, dtype=np.int64))
    parameters = {"d_model": 4}
    sinusoidal = models.Repository.of(FAMILIES).model("sinusoidal")
    for served, inputs in ((sinusoidal, {"positions": ids}), (models.ROTARY_APPLY, {})):
        plain = wire.Request(None, parameters, inputs, None, False)
        echoed = wire.Request("é" * 100, parameters, inputs, None, False)
        assert models.answer_bytes(served, echoed) == models.answer_bytes(served, plain) + 200

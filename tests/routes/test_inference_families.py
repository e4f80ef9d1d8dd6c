"""Every family served is a model of the Open Inference Protocol, made from its
declaration: its rows at posted ``positions`` (or its block, for ALiBi), equal bit for bit
to the ``/v1`` answer, read with the protocol's real client (``tritonclient``, HTTP and
gRPC) from a real ``python -m service``; its metadata, configuration, index entry and
statistics; and a stub family registered by a test is a model too, over REST and gRPC."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.grpc import service_pb2, service_pb2_grpc

from service.app import create_app
from service.inference import grpc as grpc_service
from service.inference import models
from service.inference.models import Repository
from service.routes import FAMILIES
from service.runtime import QUICK_ELEMENTS, Runtime
from service.settings import Settings
from tests import seam
from tests.routes.test_inference_schema import REQUESTS
from tests.support import LLAMA_31, WAIT, free_port, in_process, serving

MODELS = list(Repository.of(FAMILIES).models)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str]]:
    """The service's base URL and its gRPC address."""
    port = free_port()
    with serving({"PE_GRPC_PORT": str(port)}) as (url, _):
        yield url, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def http(live: tuple[str, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live[0], timeout=WAIT) as client:
        yield client


@pytest.fixture(scope="module")
def clients(live: tuple[str, str]) -> Iterator[dict[str, Any]]:
    """tritonclient's two clients, by protocol."""
    over_http = triton_http.InferenceServerClient(live[0].removeprefix("http://"))
    over_grpc = triton_grpc.InferenceServerClient(live[1])
    yield {"http": over_http, "grpc": over_grpc}
    over_http.close()
    over_grpc.close()


def npy(response: httpx.Response) -> np.ndarray[Any, Any]:
    assert response.status_code == 200, response.text[:300]
    return np.asarray(np.load(io.BytesIO(response.content)))


def npz(response: httpx.Response) -> dict[str, np.ndarray[Any, Any]]:
    assert response.status_code == 200, response.text[:300]
    with np.load(io.BytesIO(response.content)) as members:
        return dict(members)


def infer(
    client: Any,
    protocol: str,
    model: str,
    positions: np.ndarray[Any, Any] | None,
    parameters: dict[str, Any],
    outputs: list[str],
) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs of one infer call by tritonclient, binary where the client can ask."""
    module = triton_http if protocol == "http" else triton_grpc
    inputs = []
    if positions is not None:
        datatype = {"int64": "INT64", "int32": "INT32", "float32": "FP32", "float64": "FP64"}
        given = module.InferInput(
            "positions", list(positions.shape), datatype[positions.dtype.name]
        )
        given.set_data_from_numpy(positions)
        inputs.append(given)
    if protocol == "http":
        asked = [module.InferRequestedOutput(name, binary_data=True) for name in outputs]
    else:
        asked = [module.InferRequestedOutput(name) for name in outputs]
    result = client.infer(model, inputs, outputs=asked, parameters=parameters)
    return {name: result.as_numpy(name) for name in outputs}


def test_every_family_is_a_model_with_its_config(http: httpx.Client) -> None:
    """The index lists one model per family served and the apply models; each answers its
    metadata, its configuration (as Triton states it) and its readiness."""
    index = http.post("/v2/repository/index", json={}).json()
    assert [entry["name"] for entry in index] == MODELS
    assert {entry["state"] for entry in index} == {"READY"}
    families = {declared.family.name for declared in FAMILIES}
    applies = {"sinusoidal-apply", "rotary-apply", "rope-nd-apply", "vision-rotary-apply"}
    assert families | applies == set(MODELS)
    for name in MODELS:
        metadata = http.get(f"/v2/models/{name}").json()
        config = http.get(f"/v2/models/{name}/config").json()
        assert config == http.get(f"/v2/models/{name}/versions/1/config").json()
        assert config["name"] == metadata["name"] == name
        assert config["max_batch_size"] == 0
        for kind, key in (("inputs", "input"), ("outputs", "output")):
            stated = [(t["name"], "TYPE_" + t["datatype"], t["shape"]) for t in metadata[kind]]
            assert stated == [(t["name"], t["data_type"], t["dims"]) for t in config[key]]
        assert http.get(f"/v2/models/{name}/ready").status_code == 200
    rotary = http.get("/v2/models/rotary").json()
    assert [t["name"] for t in rotary["outputs"]] == ["cos", "sin"]
    assert [t["name"] for t in http.get("/v2/models/alibi-slopes").json()["outputs"]] == ["slopes"]
    assert http.get("/v2/models/alibi").json()["inputs"] == []
    timestep = http.get("/v2/models/timestep").json()["inputs"][0]
    assert timestep["parameters"]["datatypes"] == ["FP32", "FP64", "INT64", "INT32"]
    assert http.get("/v2/models/rope-nd").json()["inputs"][0]["shape"] == [-1, -1]
    assert http.get("/v2/models/nothing/config").json() == {
        "error": http.get("/v2/models/nothing").json()["error"]
    }


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonclient_reads_every_model(clients: dict[str, Any], protocol: str) -> None:
    """get_model_repository_index, get_model_metadata and get_model_config for each."""
    client = clients[protocol]
    as_json = {"as_json": True} if protocol == "grpc" else {}
    index = client.get_model_repository_index(**as_json)
    entries = index["models"] if protocol == "grpc" else index
    assert [entry["name"] for entry in entries] == MODELS
    for name in MODELS:
        metadata = client.get_model_metadata(name, **as_json)
        config = client.get_model_config(name, **as_json)
        config = config["config"] if protocol == "grpc" else config
        assert metadata["name"] == config["name"] == name
        inputs = [spec["name"] for spec in metadata.get("inputs", [])]
        assert inputs == [spec["name"] for spec in config.get("input", [])]
        assert client.is_model_ready(name)


L = 300
TIMESTEPS = np.array([999.0, 500.5, 0.25, 1.0, 0.0], dtype=np.float32)
# each: the model, its positions, its parameters, its outputs, and the /v1 request
# whose answer it must equal (npz members, or one npy array)
CASES: list[tuple[str, Any, dict[str, Any], list[str], tuple[str, str, dict[str, Any]]]] = [
    (
        "rotary",
        np.arange(L, dtype=np.int64),
        LLAMA_31,
        ["cos", "sin"],
        ("GET", "/v1/encodings/rotary", {**LLAMA_31, "max_len": L, "format": "npz"}),
    ),
    (
        "rotary",
        np.array([8191, 0, 70000, 8192, 5], dtype=np.int32),
        LLAMA_31,
        ["cos", "sin"],
        ("POST", "/v1/encodings/rotary/positions", {**LLAMA_31, "max_len": 1, "format": "npz"}),
    ),
    (
        "alibi-slopes",
        None,
        {"num_heads": 12},
        ["slopes"],
        ("GET", "/v1/biases/alibi/slopes", {"num_heads": 12, "format": "npy"}),
    ),
    (
        "alibi",
        None,
        {"num_heads": 4, "max_len": 16, "key_len": 16},
        ["bias"],
        (
            "GET",
            "/v1/biases/alibi",
            {"num_heads": 4, "max_len": 16, "key_len": 16, "format": "npy"},
        ),
    ),
    (
        "temperature",
        np.arange(L, dtype=np.int64),
        {},
        ["encodings"],
        ("GET", "/v1/encodings/temperature", {"max_len": L, "format": "npy"}),
    ),
    (
        "timestep",
        TIMESTEPS,
        {"dim": 256, "preset": "flux"},
        ["encodings"],
        (
            "POST",
            "/v1/encodings/timestep/positions",
            {"dim": 256, "preset": "flux", "max_len": 1, "format": "npy"},
        ),
    ),
    (
        "sinusoidal",
        np.arange(L, dtype=np.int64),
        {"d_model": 64},
        ["encodings"],
        ("GET", "/v1/encodings/sinusoidal", {"d_model": 64, "max_len": L, "format": "npy"}),
    ),
    (
        "sincos-2d",
        np.arange(64, dtype=np.int64),
        {"height": 8, "width": 8, "dim": 32},
        ["encodings"],
        ("GET", "/v1/encodings/sincos-2d", {"height": 8, "width": 8, "dim": 32, "format": "npy"}),
    ),
]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("model", "positions", "parameters", "outputs", "v1"),
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_a_family_over_v2_is_its_v1_answer_bit_for_bit(
    http: httpx.Client,
    clients: dict[str, Any],
    protocol: str,
    model: str,
    positions: Any,
    parameters: dict[str, Any],
    outputs: list[str],
    v1: tuple[str, str, dict[str, Any]],
) -> None:
    got = infer(clients[protocol], protocol, model, positions, parameters, outputs)
    method, path, query = v1
    if method == "GET":
        response = http.get(path, params=query)
    else:
        ids = positions.tolist()
        response = http.post(path, params=query, json={"position_ids": ids})
    expected = npz(response) if len(outputs) > 1 else {outputs[0]: npy(response)}
    for name in outputs:
        assert got[name].dtype == expected[name].dtype
        assert got[name].shape == expected[name].shape
        assert got[name].tobytes() == expected[name].tobytes(), name


def test_ids_of_several_axes_are_n_axes_by_l(clients: dict[str, Any], http: httpx.Client) -> None:
    """rope-nd's ids are [n_axes, L], as its /v1 positions' (axes, L)."""
    ids = np.array([[0, 0, 0, 1], [0, 1, 2, 3], [5, 4, 3, 2]], dtype=np.float32)
    parameters = {"preset": "flux", "grid": "2,2"}
    got = infer(clients["grpc"], "grpc", "rope-nd", ids, parameters, ["cos", "sin"])
    response = http.post(
        "/v1/encodings/rope-nd/positions",
        params={**parameters, "format": "npz"},
        json={"position_ids": ids.tolist()},
    )
    expected = npz(response)
    for name in ("cos", "sin"):
        assert got[name].tobytes() == expected[name].tobytes()


def error(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text[:300]
    document = response.json()
    assert list(document) == ["error"]
    for word in words:
        assert word in document["error"], document["error"]


def positions(values: list[Any], datatype: str = "INT64", shape: list[int] | None = None) -> Any:
    return {
        "name": "positions",
        "datatype": datatype,
        "shape": shape or [len(values)],
        "data": values,
    }


@pytest.mark.parametrize(
    ("model", "body", "words"),
    [
        ("rotary", {"inputs": [positions([1])], "parameters": {"head_dim": 7}}, ["head_dim"]),
        ("rotary", {"inputs": [positions([1])], "parameters": {"max_len": 0}}, ["max_len"]),
        ("rotary", {"inputs": [positions([1.5], "FP32")]}, ["FP32", "INT64"]),
        ("rotary", {"inputs": [positions([-1])]}, ["non-negative"]),
        ("rotary", {"inputs": [positions([2**40])]}, ["largest position"]),
        ("rotary", {"inputs": []}, ["positions", "required"]),
        (
            "rope-nd",
            {
                "inputs": [positions([1, 2], "FP32")],
                "parameters": {"preset": "flux", "grid": "2,2"},
            },
            ["[3, -1]"],
        ),
        ("alibi-slopes", {"inputs": [], "parameters": {"num_heads": 0}}, ["num_heads"]),
        (
            "alibi",
            {"inputs": [], "parameters": {"num_heads": 2, "max_len": 4, "key_len": 4}},
            ["-inf", "binary_data"],
        ),
        ("alibi", {"inputs": [positions([1])], "parameters": {"num_heads": 2}}, ["positions"]),
        (
            "temperature",
            {"inputs": [positions([1])], "parameters": {"floor_scale": "x"}},
            ["floor_scale"],
        ),
        # a grid's table has its tokens' rows, no more (its GET's stop is refused past them)
        (
            "sincos-2d",
            {"inputs": [positions([3, 4])], "parameters": {"height": 2, "width": 2, "dim": 8}},
            ["positions", "below the table's 4 rows"],
        ),
        (
            "sincos-3d",
            {
                "inputs": [positions([2**31 - 1])],
                "parameters": {"frames": 1, "height": 1, "width": 1, "dim": 16},
            },
            ["positions", "below the table's 1 rows"],
        ),
    ],
)
def test_bad_input_is_the_protocol_s_error(
    http: httpx.Client, model: str, body: dict[str, Any], words: list[str]
) -> None:
    error(http.post(f"/v2/models/{model}/infer", json=body), 400, *words)


def test_vision_rotary_positions_are_coordinates_not_rows(http: httpx.Client) -> None:
    """A patch's row and column may pass the table's token count (a 4 x 4 grid's 16 rows):
    they are coordinates, answered as POST .../positions answers them."""
    body = {
        "inputs": [positions([0, 0, 15, 16], shape=[2, 2])],
        "parameters": {"model": "pixtral", "grid": "4,4"},
    }
    answer = http.post("/v2/models/vision-rotary/infer", json=body)
    assert answer.status_code == 200, answer.text
    cos = next(o for o in answer.json()["outputs"] if o["name"] == "cos")
    v1 = http.post(
        "/v1/encodings/vision-rotary/positions?model=pixtral&grid=4,4&format=json",
        json={"position_ids": [[0, 0], [15, 16]]},
    )
    assert v1.status_code == 200, v1.text
    assert np.array_equal(np.float32(cos["data"]), np.float32(v1.json()["cos"]).ravel())


def test_statistics_count_each_model_s_answers(live: tuple[str, str]) -> None:
    """Successes and failures of each model, over REST and gRPC alike (one worker)."""
    with httpx.Client(base_url=live[0], timeout=WAIT) as http:
        before = http.get("/v2/models/temperature/stats").json()["model_stats"][0]
        body = {"inputs": [positions([0, 1, 2])]}
        assert http.post("/v2/models/temperature/infer", json=body).status_code == 200
        bad = {"inputs": [positions([-1])]}
        assert http.post("/v2/models/temperature/infer", json=bad).status_code == 400
        client = triton_grpc.InferenceServerClient(live[1])
        infer(client, "grpc", "temperature", np.arange(3), {}, ["encodings"])
        # over gRPC, an input of the wrong size: a failure of the model's too
        short = service_pb2.ModelInferRequest(model_name="temperature")
        short.inputs.add(name="positions", datatype="INT64", shape=[3])
        short.raw_input_contents.append(np.arange(2).tobytes())
        with grpc.insecure_channel(live[1]) as channel, pytest.raises(grpc.RpcError):
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(short)
        after = client.get_inference_statistics("temperature", as_json=True)["model_stats"][0]
        client.close()
    assert after["name"] == "temperature"
    stats, earlier = after["inference_stats"], before["inference_stats"]
    assert int(stats["success"]["count"]) == int(earlier["success"].get("count", 0)) + 2
    assert int(stats["fail"]["count"]) == int(earlier["fail"].get("count", 0)) + 2
    assert int(after["inference_count"]) == int(before["inference_count"]) + 2
    every = http_stats(live[0])
    assert [entry["name"] for entry in every["model_stats"]] == MODELS


def http_stats(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=WAIT) as http:
        return http.get("/v2/models/stats").json()  # type: ignore[no-any-return]


def test_a_stub_family_is_a_model_over_rest_and_grpc() -> None:
    """A family a test registers is on /v2 from its declaration alone: listed, described,
    and answering its rows, over REST and over gRPC."""
    port = free_port()
    settings = Settings(grpc_port=port)
    with seam.served() as stubs, in_process(create_app(settings, families=stubs)) as http:
        names = [entry["name"] for entry in http.post("/v2/repository/index").json()]
        assert "ramp" in names
        metadata = http.get("/v2/models/ramp").json()
        assert [t["name"] for t in metadata["inputs"]] == ["positions"]
        body = {"inputs": [positions([0, 2])], "parameters": {"width": 3}}
        answer = http.post("/v2/models/ramp/infer", json=body).json()
        expected = np.load(
            io.BytesIO(
                http.get(
                    "/v1/encodings/ramp", params={"max_len": 3, "width": 3, "format": "npy"}
                ).content
            )
        )[[0, 2]]
        assert answer["outputs"][0]["data"] == expected.ravel().tolist()
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            assert "ramp" in [
                m["name"] for m in client.get_model_repository_index(as_json=True)["models"]
            ]
            assert client.get_model_metadata("ramp", as_json=True)["name"] == "ramp"
            got = infer(client, "grpc", "ramp", np.array([0, 2]), {"width": 3}, ["encodings"])
        finally:
            client.close()
        assert got["encodings"].tobytes() == expected.tobytes()


def test_timesteps_must_be_finite(clients: dict[str, Any]) -> None:
    """NaN or infinity in real-valued positions is refused, naming them (binary data: JSON
    has no NaN)."""
    for value in (np.nan, np.inf):
        with pytest.raises(triton_grpc.InferenceServerException) as caught:
            infer(
                clients["grpc"],
                "grpc",
                "timestep",
                np.array([1.0, value]),
                {"dim": 8},
                ["encodings"],
            )
        assert "positions: must be finite" in caught.value.message()


def test_the_index_reads_its_optional_body(http: httpx.Client) -> None:
    """Empty (as tritonclient sends it), ``ready`` filtering, one repository, a few KiB."""
    every = http.post("/v2/repository/index").json()
    assert http.post("/v2/repository/index", json={"ready": True}).json() == every
    assert http.post("/v2/repository/index", json={"repository_name": ""}).json() == every
    error(http.post("/v2/repository/index", json={"repository_name": "x"}), 400, "one repository")
    error(http.post("/v2/repository/index", json={"ready": "yes"}), 400, "ready")
    error(http.post("/v2/repository/index", json={"models": []}), 400, "models")
    error(http.post("/v2/repository/index", content=b" " * 5000), 413, "4,096")
    gzipped = {"content-encoding": "gzip"}
    error(http.post("/v2/repository/index", content=b"{}", headers=gzipped), 415, "gzip")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("family", "parameters", "shape"),
    [
        pytest.param(
            "rope-nd",
            {"preset": "flux", "grid": "2,2", "text_tokens": 1},
            (1, 2, 5, 128),
            id="rope-nd",
        ),
        pytest.param(
            "vision-rotary", {"model": "llama4", "grid": "2,2"}, (1, 2, 5, 88), id="vision-rotary"
        ),
    ],
)
def test_grid_apply_models_are_their_v1_apply(
    http: httpx.Client,
    clients: dict[str, Any],
    protocol: str,
    family: str,
    parameters: dict[str, Any],
    shape: tuple[int, ...],
) -> None:
    """rope-nd's and vision-rotary's apply endpoints are models too: (B, heads, L,
    head_dim) turned by the grid's table, as their /v1 apply answers."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    module = triton_http if protocol == "http" else triton_grpc
    given = module.InferInput("embeddings", list(x.shape), "FP32")
    given.set_data_from_numpy(x)
    result = clients[protocol].infer(f"{family}-apply", [given], parameters=parameters)
    buffer = io.BytesIO()
    np.save(buffer, x)
    response = http.post(
        f"/v1/encodings/{family}/apply",
        params={**parameters, "format": "npy"},
        content=buffer.getvalue(),
        headers={"content-type": "application/x-npy"},
    )
    assert result.as_numpy("embeddings").tobytes() == npy(response).tobytes()


@pytest.mark.parametrize("model", MODELS)
def test_every_model_refuses_what_it_does_not_take(http: httpx.Client, model: str) -> None:
    """An unknown parameter, an unknown input and an unknown output: 400s that name them,
    in the protocol's shape; an unknown version: 404."""
    path, good = f"/v2/models/{model}/infer", REQUESTS[model]
    assert http.post(path, json=good).status_code == 200
    body = {**good, "parameters": {**good.get("parameters", {}), "nope": 1}}
    error(http.post(path, json=body), 400, "nope", "not a parameter")
    stray = {**good, "inputs": [*good["inputs"], positions([1]) | {"name": "stray"}]}
    error(http.post(path, json=stray), 400, "stray", "not an input")
    asked = {**good, "outputs": [{"name": "elsewhere"}]}
    error(http.post(path, json=asked), 400, "elsewhere", "not an output")
    error(http.post(f"/v2/models/{model}/versions/2/infer", json=good), 404, "version")


def test_a_large_answer_of_a_small_request_is_computed_in_the_cpu_lane(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request of a few hundred bytes may ask for PE_MAX_ELEMENTS numbers (ALiBi's block):
    its run takes the lane of its answer's numbers, not of its message's bytes, over REST
    and gRPC (in the quick lane, two such runs kept every small request waiting seconds)."""
    lanes: list[int] = []
    compute = Runtime.compute

    async def recording(self: Runtime, elements: int, work: Any, *args: Any) -> Any:
        if work in (models.infer, grpc_service._run):
            lanes.append(elements)
        return await compute(self, elements, work, *args)

    monkeypatch.setattr(Runtime, "compute", recording)
    parameters = {"num_heads": 16, "max_len": 256, "key_len": 256, "form": "symmetric"}
    port = free_port()
    with in_process(create_app(Settings(grpc_port=port))) as http:
        body = {"inputs": [], "parameters": {**parameters, "binary_data_output": True}}
        assert http.post("/v2/models/alibi/infer", json=body).status_code == 200
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            got = infer(client, "grpc", "alibi", None, parameters, ["bias"])
        finally:
            client.close()
    assert got["bias"].size == 16 * 256 * 256
    assert len(lanes) == 2
    assert all(elements > QUICK_ELEMENTS for elements in lanes), lanes


def test_grpc_s_small_methods_refuse_large_messages_and_read_the_index_request() -> None:
    """ModelConfig, ModelStatistics, RepositoryIndex and the others read a name or two:
    a message past a few KiB is refused before protobuf reads it (on the event loop); the
    index refuses a repository's name and filters by ``ready``, as the REST index does."""
    port = free_port()
    with in_process(create_app(Settings(grpc_port=port))):
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            long = "a" * ((64 << 10) + 1)  # past grpc_service.SMALL_BYTES
            calls: list[Callable[[], Any]] = [
                lambda: client.get_model_config(long),
                lambda: client.get_inference_statistics(long),
                lambda: client.get_model_metadata("rotary", model_version=long),
            ]
            for call in calls:
                with pytest.raises(triton_grpc.InferenceServerException) as caught:
                    call()
                assert caught.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
                assert "65,536" in caught.value.message()
            assert client.get_model_config("rotary", as_json=True)["config"]["name"] == "rotary"
            index = client.get_model_repository_index(as_json=True)["models"]
            assert [entry["name"] for entry in index] == MODELS
        finally:
            client.close()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True))
            assert [entry.name for entry in ready.models] == MODELS
            with pytest.raises(grpc.RpcError) as refused:
                stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(repository_name="x"))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "repository_name" in (refused.value.details() or "")
            with pytest.raises(grpc.RpcError) as refused:
                stub.ModelStatistics(service_pb2.ModelStatisticsRequest(version="1"))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "model's name" in (refused.value.details() or "")


@pytest.mark.parametrize("max_len", [None, 131072])
def test_max_len_is_the_positions_reach_or_the_request_s(
    http: httpx.Client, clients: dict[str, Any], max_len: int | None
) -> None:
    """A scaling may read max_len (longrope's factors: short up to its original context,
    long past it): by default the positions' largest + 1, or what the request gives, as
    ``POST .../positions`` takes it."""
    pairs = 4
    parameters: dict[str, Any] = {
        "head_dim": 2 * pairs,
        "scaling": "longrope",
        "original_max_position_embeddings": 4096,
        "max_position_embeddings": 131072,
        "short_factor": ",".join(["1.0"] * pairs),
        "long_factor": ",".join(["4.0"] * pairs),
    }
    ids = np.array([0, 1, 2, 100], dtype=np.int64)
    asked = parameters if max_len is None else {**parameters, "max_len": max_len}
    got = infer(clients["grpc"], "grpc", "rotary", ids, asked, ["cos", "sin"])
    reach = 101 if max_len is None else max_len
    response = http.post(
        "/v1/encodings/rotary/positions",
        params={**parameters, "max_len": reach, "format": "npz"},
        json={"position_ids": ids.tolist()},
    )
    expected = npz(response)
    for name in ("cos", "sin"):
        assert got[name].tobytes() == expected[name].tobytes()
    if max_len is not None:  # the long factors: another table than the default's
        short = infer(clients["grpc"], "grpc", "rotary", ids, parameters, ["cos"])["cos"]
        assert short.tobytes() != got["cos"].tobytes()


def test_each_stub_s_metadata_states_what_it_takes() -> None:
    """The seam's stubs on /v2 (their declarations say nothing of it): a grid of two
    real-valued axes states ``[-1, -1]`` and takes ``[2, L]``; named arrays are outputs; a
    block has no input."""
    with seam.served() as stubs, in_process(create_app(Settings(), families=stubs)) as http:
        documents = {
            name: http.get(f"/v2/models/{name}").json()
            for name in ("ramp", "grid", "phases", "distances")
        }
        assert documents["grid"]["inputs"][0]["shape"] == [-1, -1]
        assert documents["ramp"]["inputs"][0]["shape"] == [-1]
        assert [t["name"] for t in documents["phases"]["outputs"]] == ["cos", "sin"]
        assert documents["distances"]["inputs"] == []
        ids = [[0.0, 1.5, 2.0], [1.0, 0.5, 3.0]]
        grid = {"height": 2, "columns": 2, "pairs": 2}
        flat = [value for axis in ids for value in axis]
        body = {"inputs": [positions(flat, "FP64", [2, 3])], "parameters": grid}
        answer = http.post("/v2/models/grid/infer", json=body)
        assert answer.status_code == 200, answer.text
        v1 = http.post(
            "/v1/encodings/grid/positions",
            params={**grid, "format": "npy"},
            json={"position_ids": ids},
        )
        assert answer.json()["outputs"][0]["data"] == npy(v1).ravel().tolist()

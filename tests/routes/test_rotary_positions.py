"""``POST /v1/encodings/rotary/positions``: cos and sin at posted position ids, ``(L,)`` or
``(B, L)`` (the table's rows), and with M-RoPE ``(3, L)`` or ``(3, B, L)``: each pair at its
axis's position, the sections in order (Qwen2-VL) or interleaved (Qwen3-VL)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
import safetensors.numpy
from numpy.typing import NDArray

from service import ids as posted_ids
from service.app import create_app
from service.runtime import Runtime
from service.settings import Settings
from tests.support import assert_problem, client_of, in_process, npy_bytes, npz_bytes

ROTARY = "/v1/encodings/rotary"
TABLE = "max_len=4096&head_dim=16&base=10000"
NPY = {"content-type": "application/x-npy"}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def members(answer: httpx.Response) -> dict[str, NDArray[np.float32]]:
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        return {name: archive[name] for name in archive.files}


@pytest.fixture(scope="module")
def table(http: httpx.Client) -> dict[str, NDArray[np.float32]]:
    return members(http.get(f"{ROTARY}?{TABLE}&format=npz"))


def test_one_axis_ids_are_the_tables_rows(
    http: httpx.Client, table: dict[str, NDArray[np.float32]]
) -> None:
    ids = np.array([[5, 4095, 0], [7, 7, 1]])
    got = members(
        http.post(f"{ROTARY}/positions?{TABLE}&format=npz", content=npy_bytes(ids), headers=NPY)
    )
    for name in ("cos", "sin"):
        assert got[name].shape == (2, 3, 16)
        assert np.array_equal(got[name], table[name][ids])


@pytest.mark.parametrize(
    ("interleaved", "axes"),
    [
        (False, [0, 0, 1, 1, 1, 2, 2, 2]),  # sections in order: t t h h h w w w
        (True, [0, 1, 2, 0, 1, 2, 0, 1]),  # Qwen3-VL: t h w t h w t h (h: k < 3*3, w: k < 3*3)
    ],
)
def test_three_axis_ids_turn_each_pair_by_its_axis(
    http: httpx.Client, table: dict[str, NDArray[np.float32]], interleaved: bool, axes: list[int]
) -> None:
    ids = np.array([[10, 200], [3, 40], [1000, 6]])  # (3, L): temporal, height, width
    query = f"{TABLE}&mrope_section=2,3,3&mrope_interleaved={str(interleaved).lower()}&format=npz"
    got = members(http.post(f"{ROTARY}/positions?{query}", content=npy_bytes(ids), headers=NPY))
    for name in ("cos", "sin"):
        first = np.stack([table[name][ids[axis], k] for k, axis in enumerate(axes)], axis=1)
        assert np.array_equal(got[name], np.concatenate([first, first], axis=1))


@pytest.mark.parametrize("dtype", [np.uint16, np.int64])
def test_ids_over_several_chunks_are_the_tables_rows(
    http: httpx.Client, table: dict[str, NDArray[np.float32]], dtype: type
) -> None:
    """The rows are computed a chunk of ids at a time (2^18 numbers, 8,192 rows of 32):
    20,000 ids in their posted dtype cross two chunk boundaries, rows of a batch too."""
    ids: NDArray[Any] = np.random.default_rng(3).integers(0, 4096, (2, 10_000)).astype(dtype)
    got = members(
        http.post(f"{ROTARY}/positions?{TABLE}&format=npz", content=npy_bytes(ids), headers=NPY)
    )
    for name in ("cos", "sin"):
        assert np.array_equal(got[name], table[name][ids])


def test_m_rope_ids_over_several_chunks_turn_each_pair_by_its_axis(
    http: httpx.Client, table: dict[str, NDArray[np.float32]]
) -> None:
    ids = np.random.default_rng(4).integers(0, 4096, (3, 20_000)).astype(np.uint16)
    query = f"{TABLE}&mrope_section=2,3,3&format=npy"
    answer = http.post(f"{ROTARY}/positions?{query}", content=npy_bytes(ids), headers=NPY)
    assert answer.status_code == 200, answer.text
    got = np.load(io.BytesIO(answer.content), allow_pickle=False)  # cos and sin stacked
    axes = [0, 0, 1, 1, 1, 2, 2, 2]
    for index, name in enumerate(("cos", "sin")):
        first = np.stack([table[name][ids[axis], k] for k, axis in enumerate(axes)], axis=1)
        assert np.array_equal(got[index], np.concatenate([first, first], axis=1))


def test_the_body_stays_reserved_until_its_rows_are_computed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An .npy's ids are a view of the body: its bytes count in PE_POSTED_BYTES until the
    answer is made from them, as every posted body's do."""
    held: list[int] = []

    def spying(runtime: Runtime, *args: Any) -> Any:
        held.append(runtime.posted.held)
        return answer_of(runtime, *args)

    answer_of = posted_ids.rows_at_ids
    monkeypatch.setattr("service.web.positions.rows_at_ids", spying)
    body = npy_bytes(np.arange(100, dtype=np.uint8))
    with in_process(create_app(Settings())) as http:
        answer = http.post(f"{ROTARY}/positions?{TABLE}&format=npy", content=body, headers=NPY)
    assert answer.status_code == 200, answer.text
    assert held == [len(body)]


def test_m_rope_from_a_qwen2_vl_config(http: httpx.Client) -> None:
    config = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }
    answer = http.post(
        f"{ROTARY}/from-config?format=json",
        content=orjson.dumps(config),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["mrope_section"] == [2, 3, 3]
    assert "mrope_section=2%2C3%2C3" in answer.headers["content-location"]


def test_m_rope_parameters_and_ids_are_checked(http: httpx.Client) -> None:
    three = npy_bytes(np.zeros((3, 4), np.int64))
    for query, words in [
        (f"{TABLE}&mrope_section=2,3,2", "sums to 7"),
        (f"{TABLE}&mrope_section=8", "three"),
        (f"{TABLE}&mrope_interleaved=true", "mrope_section"),
    ]:
        assert_problem(
            http.post(f"{ROTARY}/positions?{query}", content=three, headers=NPY), 422, words
        )
    one = npy_bytes(np.zeros(4, np.int64))
    refused = http.post(f"{ROTARY}/positions?{TABLE}&mrope_section=2,3,3", content=one, headers=NPY)
    assert_problem(refused, 422, "(3, L) or (3, B, L)")


def rotated(x: NDArray[np.float32], cos: NDArray[np.float32], sin: NDArray[np.float32]) -> Any:
    """Hugging Face's ``x * cos + rotate_half(x) * sin``, cos and sin broadcast over heads."""
    half = x.shape[-1] // 2
    turned = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + turned * sin


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_turns_each_pair_by_its_axis(
    http: httpx.Client, batched: bool, interleaved: bool
) -> None:
    rng = np.random.default_rng(7)
    sections = "mrope_section=2,3,3&mrope_interleaved=" + str(interleaved).lower()
    shape = (2, 3, 5, 16) if batched else (3, 5, 16)  # (B, heads, L, head_dim) or (heads, L, d)
    x = rng.standard_normal(shape).astype(np.float32)
    ids = rng.integers(0, 4096, (3, 2, 5) if batched else (3, 5))
    at = http.post(
        f"{ROTARY}/positions?{TABLE}&{sections}&format=npz", content=npy_bytes(ids), headers=NPY
    )
    rows = members(at)
    cos, sin = (rows[name][:, None] if batched else rows[name] for name in ("cos", "sin"))
    answer = http.post(
        f"{ROTARY}/apply?base=10000&{sections}&format=npy",
        content=npz_bytes(embeddings=x, position_ids=ids),
        headers={"content-type": "application/x-npz"},
    )
    assert answer.status_code == 200, answer.text
    got = np.load(io.BytesIO(answer.content))
    assert np.allclose(got, rotated(x, cos, sin), rtol=0, atol=2e-6)
    assert answer.headers["x-positions"] == "position_ids"


def test_apply_with_m_rope_takes_three_axis_ids_only(http: httpx.Client) -> None:
    x = np.zeros((3, 4, 16), np.float32)
    for ids in (np.zeros(4, np.int64), np.zeros((2, 4), np.int64), np.zeros((3, 2, 4), np.int64)):
        answer = http.post(
            f"{ROTARY}/apply?mrope_section=2,3,3",
            content=npz_bytes(embeddings=x, position_ids=ids),
            headers={"content-type": "application/x-npz"},
        )
        assert_problem(answer, 422, "position_ids", "(3, 4)")
    plain = http.post(
        f"{ROTARY}/apply?mrope_section=2,3,3&format=npy",
        content=npz_bytes(embeddings=x),
        headers={"content-type": "application/x-npz"},
    )
    assert plain.status_code == 200, plain.text  # no ids: positions 0.., every axis alike


def named_shapes(answer: httpx.Response, fmt: str) -> dict[str, tuple[int, ...]]:
    """The shape of each array an answer holds: cos and sin by name, or ``npy`` and ``raw``'s
    one array (the two stacked), as JSON states it."""
    assert answer.status_code == 200, answer.text
    if fmt == "json":  # nested lists of no number lose the shape: the answer states it
        document = answer.json()
        assert all(np.array(document[name]).size == 0 for name in ("cos", "sin"))
        return {"stacked": tuple(document["shape"])}
    if fmt == "npz":
        return {name: array.shape for name, array in members(answer).items()}
    if fmt == "safetensors":
        tensors = safetensors.numpy.load(answer.content)
        return {name: array.shape for name, array in tensors.items()}
    if fmt == "raw":
        assert answer.content == b""
        return {"stacked": tuple(int(n) for n in answer.headers["x-shape"].split(","))}
    return {"stacked": np.load(io.BytesIO(answer.content), allow_pickle=False).shape}


EMPTY_IDS = [
    pytest.param("", orjson.dumps({"position_ids": []}), JSON, (0,), id="json-[]"),
    pytest.param("", orjson.dumps({"position_ids": [[]]}), JSON, (1, 0), id="json-[[]]"),
    pytest.param("", orjson.dumps({"position_ids": [[], [], []]}), JSON, (3, 0), id="json-3x[]"),
    pytest.param("", npy_bytes(np.zeros(0, np.int64)), NPY, (0,), id="npy-(0,)"),
    pytest.param("", npy_bytes(np.zeros((2, 0), np.uint8)), NPY, (2, 0), id="npy-(2,0)"),
    pytest.param(
        "&mrope_section=2,3,3",
        orjson.dumps({"position_ids": [[], [], []]}),
        JSON,
        (0,),
        id="m-rope-json-3x[]",
    ),
    pytest.param(
        "&mrope_section=2,3,3", npy_bytes(np.zeros((3, 0), np.int64)), NPY, (0,), id="m-rope-npy"
    ),
]


@pytest.mark.parametrize("fmt", ["json", "npy", "npz", "raw", "safetensors"])
@pytest.mark.parametrize(("query", "body", "headers", "shape"), EMPTY_IDS)
def test_no_position_ids_are_an_empty_answer_in_every_format(
    http: httpx.Client,
    fmt: str,
    query: str,
    body: bytes,
    headers: dict[str, str],
    shape: tuple[int, ...],
) -> None:
    """An empty table is an array like any other: no id gives rows of none, not a 500
    (npy and raw once failed on an array with a zero in its shape)."""
    answer = http.post(
        f"{ROTARY}/positions?{TABLE}{query}&format={fmt}", content=body, headers=headers
    )
    got = named_shapes(answer, fmt)
    if fmt in ("json", "npy", "raw"):
        assert got == {"stacked": (2, *shape, 16)}
    else:
        assert got == {"cos": (*shape, 16), "sin": (*shape, 16)}


@pytest.mark.parametrize("ids", [[], [[]]])
def test_m_rope_ids_need_their_three_axes_even_when_empty(http: httpx.Client, ids: Any) -> None:
    answer = http.post(
        f"{ROTARY}/positions?{TABLE}&mrope_section=2,3,3&format=npy",
        content=orjson.dumps({"position_ids": ids}),
        headers=JSON,
    )
    assert_problem(answer, 422, "position_ids", "(3, L)")

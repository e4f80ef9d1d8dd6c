"""``POST /v1/compare``: two tables side by side over positions, each from a family's GET
parameters or a config; the figures checked against the two tables' own GETs."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray
from PIL import Image

from service import plots
from service.audit import compare
from service.encodings.registry import Key
from service.routes import FAMILIES
from service.web.compare import Comparison
from tests.support import assert_problem, client_of

JSON = {"content-type": "application/json"}
HEAD = {"head_dim": 64, "base": 10000}
values, difference = compare.values, plots.difference


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def post(http: httpx.Client, body: Any) -> httpx.Response:
    return http.post("/v1/compare", content=orjson.dumps(body), headers=JSON)


def halves(http: httpx.Client, query: dict[str, Any]) -> Any:
    answer = http.get("/v1/encodings/rotary", params={**query, "format": "npz"})
    with np.load(io.BytesIO(answer.content)) as archive:
        half = archive["cos"].shape[1] // 2
        return np.concatenate([archive["cos"][:, :half], archive["sin"][:, :half]], 1)


def test_library_against_exact(http: httpx.Client) -> None:
    body = {
        "a": {"family": "rotary", "parameters": HEAD},
        "b": {"family": "rotary", "parameters": {**HEAD, "rounding": "exact", "dtype": "float64"}},
        "stop": 4096,
    }
    answer = post(http, body)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    a = halves(http, {**HEAD, "max_len": 4096}).astype(np.float64)
    b = halves(http, {**HEAD, "max_len": 4096, "rounding": "exact", "dtype": "float64"})
    differences = np.abs(a - b).max(axis=1)
    for span in document["bands"]:
        inside = differences[span["start"] : span["stop"]]
        if span["stop"] - span["start"] <= 512:  # small bands: every position
            assert span["samples"] == span["stop"] - span["start"]
            assert span["max_difference"] == pytest.approx(inside.max())
        else:  # sampled: at most the band's largest, and not far below it
            assert span["samples"] < len(inside)
            assert inside.max() / 2 <= span["max_difference"] <= inside.max()
        assert span["max_angle_drift"] < 1e-3
    assert document["first_over"] == {"1e-3": None, "1e-2": None, "1e-1": None}


def test_transformers_against_vllm_for_one_config(http: httpx.Client) -> None:
    config = {
        "head_dim": 64,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
    }
    body = {
        "a": {"family": "rotary", "config": config, "parameters": {"max_len": 16384}},
        "b": {
            "family": "rotary",
            "config": config,
            "parameters": {"max_len": 16384, "engine": "vllm"},
        },
        "start": 4096,
        "stop": 16384,
    }
    document = post(http, body).json()
    assert document["bands"][0]["start"] == 4096
    assert document["first_over"]["1e-1"] is not None  # the rescaled base against the static one
    assert all(first >= 4096 for first in document["first_over"].values())  # within the range
    assert max(span["max_angle_drift"] for span in document["bands"]) > 1


def test_what_cannot_be_compared_is_refused(http: httpx.Client) -> None:
    rotary = {"family": "rotary", "parameters": HEAD}
    for body, words in [
        (
            {"a": rotary, "b": {"family": "rotary", "parameters": {"head_dim": 32}}, "stop": 8},
            ["b", "not comparable"],
        ),
        ({"a": rotary, "b": {"family": "alibi", "parameters": {}}, "stop": 8}, ["b.family"]),
        (
            {"a": rotary, "b": {"family": "rotary", "parameters": {"head_dim": "x"}}, "stop": 8},
            ["head_dim"],
        ),
        ({"a": rotary, "b": rotary, "start": 8, "stop": 8}, ["stop"]),
        ({"a": rotary, "b": rotary}, ["stop"]),
        (
            {
                "a": rotary,
                "b": {"family": "sinusoidal", "config": {"head_dim": 8}},
                "stop": 8,
            },
            ["b.config"],
        ),
        ({"a": rotary, "b": rotary, "stop": 1 << 40}, ["stop"]),
    ]:
        assert_problem(post(http, body), 422, *words)


def test_the_difference_as_a_picture(http: httpx.Client) -> None:
    body = {
        "a": {"family": "rotary", "parameters": HEAD},
        "b": {"family": "rotary", "parameters": {**HEAD, "base": 20000}},
        "stop": 100000,
    }
    answer = http.post("/v1/compare?format=png", content=orjson.dumps(body), headers=JSON)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    assert answer.content.startswith(b"\x89PNG")
    assert_problem(
        http.post("/v1/compare?format=npy", content=orjson.dumps(body), headers=JSON),
        422,
        "format",
    )


SMALL = {
    "a": {"family": "rotary", "parameters": HEAD},
    "b": {"family": "rotary", "parameters": {**HEAD, "base": 20000}},
    "stop": 64,
}


@pytest.mark.parametrize(
    ("query", "accept", "media_type", "varies"),
    [
        pytest.param("", None, "application/json", True, id="no-accept"),
        pytest.param("", "image/png", "image/png", True, id="png"),
        pytest.param("", "application/json", "application/json", True, id="json"),
        pytest.param("", "image/*;q=0.9, */*;q=0.1", "image/png", True, id="ranges"),
        pytest.param("?format=png", "text/html", "image/png", False, id="format-wins"),
    ],
)
def test_accept_chooses_the_format(
    http: httpx.Client, query: str, accept: str | None, media_type: str, varies: bool
) -> None:
    headers = {**JSON, **({"accept": accept} if accept else {})}
    answer = http.post(f"/v1/compare{query}", content=orjson.dumps(SMALL), headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == media_type
    assert ("Accept" in answer.headers.get("vary", "")) is varies


def test_an_accept_naming_neither_format_is_refused(http: httpx.Client) -> None:
    headers = {**JSON, "accept": "text/html"}
    refused = http.post("/v1/compare", content=orjson.dumps(SMALL), headers=headers)
    assert_problem(refused, 406, "image/png", "application/json")


def test_each_table_is_computed_once_a_chunk_at_a_time(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each position of each table is computed once (it was twice), at most a chunk of
    2^20 entries at a time (it was every position at once)."""
    computed: Counter[Key] = Counter()
    entries: list[int] = []

    def counting(key: Key, positions: NDArray[np.int64]) -> NDArray[np.float64]:
        computed[key] += len(positions)
        entries.append(len(positions) * key.width)
        return values(key, positions)

    monkeypatch.setattr(compare, "values", counting)
    single = {"family": "sinusoidal", "parameters": {"d_model": 4096}}
    double = {"family": "sinusoidal", "parameters": {"d_model": 4096, "dtype": "float64"}}
    answer = post(http, {"a": single, "b": double, "stop": 512})
    assert answer.status_code == 200, answer.text
    assert set(answer.json()["first_over"].values()) == {None}  # nothing refined
    assert sorted(computed.values()) == [512, 512]
    assert max(entries) <= 1 << 20


def test_a_compare_computes_no_more_than_it_is_charged(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refining the first crossings between positions sampled far apart (up to 2^31)
    computes more positions than those planned, and no more than the charge counts."""
    computed: Counter[Key] = Counter()

    def counting(key: Key, positions: NDArray[np.int64]) -> NDArray[np.float64]:
        computed[key] += len(positions)
        return values(key, positions)

    monkeypatch.setattr(compare, "values", counting)
    table = {"d_model": 4, "dtype": "float64"}
    answer = post(
        http,
        {
            "a": {"family": "sinusoidal", "parameters": table},
            "b": {"family": "sinusoidal", "parameters": {**table, "base": 10000.0001}},
            "stop": 1 << 31,
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["first_over"]["1e-1"] > 1 << 30  # found in the last band
    _, planned = compare.plan(0, 1 << 31)
    assert len(planned) < min(computed.values())
    assert max(computed.values()) <= compare.cost(0, 1 << 31)


def test_the_picture_is_reduced_before_it_is_drawn_and_says_what_it_compares(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries: list[int] = []
    drawn: list[tuple[tuple[int, ...], str]] = []

    def counting(key: Key, positions: NDArray[np.int64]) -> NDArray[np.float64]:
        entries.append(len(positions) * key.width)
        return values(key, positions)

    def drawing(matrix: NDArray[np.float64], *args: Any, title: str) -> bytes:
        drawn.append((matrix.shape, title))
        return difference(matrix, *args, title=title)

    monkeypatch.setattr(compare, "values", counting)
    monkeypatch.setattr(plots, "difference", drawing)
    body = {
        "a": {"family": "sinusoidal", "parameters": {"d_model": 4096}},
        "b": {"family": "sinusoidal", "parameters": {"d_model": 4096, "base": 20000}},
        "stop": 2048,
    }
    answer = http.post("/v1/compare?format=png", content=orjson.dumps(body), headers=JSON)
    assert answer.status_code == 200, answer.text
    [(shape, title)] = drawn
    assert shape[0] <= 640
    assert shape[1] <= 900
    assert max(entries) <= 1 << 20
    lines = title.splitlines()
    assert lines[1:] == ["a: sinusoidal d_model=4096", "b: sinusoidal d_model=4096 base=20000"]


def test_a_long_title_fits_the_picture() -> None:
    """A title's lines wrap into two at most, the second cut short with "…", within the
    picture: nothing is drawn at its left and right edges (a line of digits was wider than
    the picture, cut at both edges)."""
    factors = " ".join(["0123456789"] * 200)
    title = f"|a - b| at positions 0 to 99\na: rotary long_factor={factors}\nb: {factors}"
    png = plots.difference(
        np.full((8, 8), 1e-3),
        plots.Axis("position", 0, 7),
        plots.Axis("entry", 0, 7),
        title=title,
    )
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    inked = pixels < 160
    assert not inked[:, :3].any()
    assert not inked[:, -3:].any()
    assert inked[:, 100:800].any(axis=1).sum() > 300  # the plot keeps most of the height


def test_the_body_and_each_tables_query_are_validated_off_the_event_loop(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body of ``PE_MAX_CONFIG_BYTES`` holds some 87,000 fields a table: validating them
    takes the event loop for half a second, so it is a worker's."""
    rotary = next(each for each in FAMILIES if each.family.name == "rotary").query
    where: list[tuple[str, bool]] = []

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    for model in (Comparison, rotary):
        validate = model.model_validate

        def watched(value: Any, _validate: Any = validate, _name: str = model.__name__) -> Any:
            where.append((_name, on_loop()))
            return _validate(value)

        monkeypatch.setattr(model, "model_validate", watched)
    body = {
        "a": {"family": "rotary", "parameters": HEAD},
        "b": {"family": "rotary", "parameters": {**HEAD, "rounding": "exact"}},
        "stop": 64,
    }
    assert post(http, body).status_code == 200
    assert sorted(where) == sorted([("Comparison", False), *[(rotary.__name__, False)] * 2])

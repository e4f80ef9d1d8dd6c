"""The pictures over HTTP, against a real server and the in-process app: decoded PNGs,
validators, limits, replay, and 501 without matplotlib."""

from __future__ import annotations

import io
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from service import plots
from service.app import create_app
from service.settings import Settings
from tests.support import HEATMAP, SIMILARITY, assert_problem, cache_stats, in_process, sample

IMMUTABLE = "public, max-age=31536000, immutable"


def picture(response: httpx.Response) -> np.ndarray[tuple[int, int, int], np.dtype[np.uint8]]:
    """The decoded PNG of a 200 answer, as RGB pixels."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGB"))


def colours(pixels: np.ndarray[tuple[int, int, int], np.dtype[np.uint8]]) -> int:
    """Distinct RGB colours (each packed into one integer: np.unique by rows is slow)."""
    rgb = pixels.reshape(-1, 3).astype(np.uint32)
    return len(np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]))


@pytest.mark.parametrize(
    ("path", "query", "size"),
    sample(
        [
            pytest.param(HEATMAP, "max_len=100&d_model=512", (600, 800), id="heatmap-default"),
            pytest.param(
                HEATMAP,
                "max_len=2048&d_model=512&layout=split&width=1024&height=768",
                (768, 1024),
                id="heatmap-2048x512",
            ),
            pytest.param(
                HEATMAP,
                "max_len=1000&d_model=64&start=100&stop=200&dim_start=8&dim_stop=40&dtype=float16",
                (600, 800),
                id="heatmap-slice",
            ),
            pytest.param(HEATMAP, "max_len=1&d_model=1&width=320&height=240", (240, 320), id="1x1"),
            pytest.param(
                HEATMAP, "max_len=50000&d_model=64&cmap=viridis", (600, 800), id="binned-rows"
            ),
            pytest.param(SIMILARITY, "max_len=100&d_model=64", (600, 800), id="similarity"),
            pytest.param(
                SIMILARITY,
                "max_len=100000&d_model=64&start=5000&width=500&height=400",
                (400, 500),
                id="similarity-stepped",
            ),
            pytest.param(SIMILARITY, "max_len=1&d_model=3", (600, 800), id="similarity-1"),
        ],
        2,
    ),
)
def test_pictures_decode_to_the_asked_size_and_are_not_blank(
    api: httpx.Client, path: str, query: str, size: tuple[int, int]
) -> None:
    response = api.get(f"{path}?{query}")
    pixels = picture(response)
    assert pixels.shape[:2] == size
    assert colours(pixels) > 50
    assert response.headers["cache-control"] == IMMUTABLE
    assert re.fullmatch(r'"[0-9a-f]{32}"', response.headers["etag"])


@pytest.mark.parametrize("path", [HEATMAP, SIMILARITY])
def test_pictures_are_cacheable_like_tables(api: httpx.Client, path: str) -> None:
    first = api.get(f"{path}?max_len=64&d_model=32")
    again = api.get(f"{path}?max_len=64&d_model=32")
    assert again.content == first.content
    assert again.headers["etag"] == first.headers["etag"]
    unchanged = api.get(
        f"{path}?max_len=64&d_model=32", headers={"if-none-match": first.headers["etag"]}
    )
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged.headers["etag"] == first.headers["etag"]
    other = api.get(f"{path}?max_len=64&d_model=32&base=100")
    assert other.headers["etag"] != first.headers["etag"]
    assert other.content != first.content


def test_the_heatmap_shows_the_asked_block(api: httpx.Client) -> None:
    """Row 0 is sin 0 = 0, cos 0 = 1: the cosine column alone is all RdBu dark blue, the
    sine column alone has none of it beyond the colorbar's end."""
    dark_blue = np.array([5, 48, 97])

    def share(query: str) -> float:
        pixels = picture(api.get(f"{HEATMAP}?max_len=1&d_model=2&{query}")).astype(int)
        return float((np.abs(pixels - dark_blue).sum(axis=2) <= 12).mean())

    assert share("dim_start=1") > 0.3
    assert share("dim_stop=1") < 0.01


@pytest.mark.parametrize(
    ("path", "query", "names"),
    [
        pytest.param(HEATMAP, "max_len=10&d_model=4&width=100", ["width"], id="too-narrow"),
        pytest.param(HEATMAP, "max_len=10&d_model=4&height=10", ["height"], id="too-low"),
        pytest.param(HEATMAP, "max_len=10&d_model=4&cmap=jet", ["cmap"], id="cmap"),
        pytest.param(HEATMAP, "max_len=10&d_model=4&format=npy", ["format"], id="format"),
        pytest.param(HEATMAP, "max_len=10&d_model=4&stop=11", ["stop"], id="stop"),
        pytest.param(HEATMAP, "max_len=10&d_model=0", ["d_model"], id="d_model"),
        pytest.param(HEATMAP, "d_model=4", ["max_len"], id="missing"),
        pytest.param(SIMILARITY, "max_len=10&d_model=4&layout=split", ["layout"], id="layout"),
        pytest.param(SIMILARITY, "max_len=10&d_model=4&base=1", ["base"], id="base"),
        pytest.param(SIMILARITY, "max_len=10&d_model=4&start=10", ["start"], id="start"),
    ],
)
def test_bad_picture_parameters_are_named(
    api: httpx.Client, path: str, query: str, names: list[str]
) -> None:
    problem = assert_problem(api.get(f"{path}?{query}"), 422)
    assert [error["name"] for error in problem["errors"]] == names


@pytest.mark.parametrize(
    ("query", "setting"),
    [
        pytest.param("max_len=10&d_model=4&width=2049", "PE_MAX_IMAGE_WIDTH", id="width"),
        pytest.param("max_len=10&d_model=4&height=4096", "PE_MAX_IMAGE_HEIGHT", id="height"),
        pytest.param(
            "max_len=100000&d_model=65536&width=2048&height=2048", "PE_MAX_ELEMENTS", id="table"
        ),
        pytest.param("max_len=10&d_model=1000000", "PE_MAX_WIDTH", id="row-width"),
        pytest.param(
            "max_len=2147483649&d_model=4&start=2147483640", "PE_MAX_POSITION", id="position"
        ),
    ],
)
@pytest.mark.parametrize("path", [HEATMAP, SIMILARITY])
def test_picture_limits_are_named(api: httpx.Client, path: str, query: str, setting: str) -> None:
    problem = assert_problem(api.get(f"{path}?{query}"), 422, setting)
    assert problem["setting"] == setting


HUGE = "1" + "0" * 400  # past any limit, and past any float (1e308)


@pytest.mark.parametrize(
    ("parameter", "words"),
    [
        pytest.param("max_len", ["max_len", "PE_MAX_POSITION"], id="max_len"),
        pytest.param("d_model", ["d_model", "PE_MAX_WIDTH"], id="d_model"),
        pytest.param("start", ["start", "less than max_len"], id="start"),
        pytest.param("stop", ["stop", "at most max_len"], id="stop"),
        pytest.param("width", ["width", "PE_MAX_IMAGE_WIDTH"], id="width"),
        pytest.param("height", ["height", "PE_MAX_IMAGE_HEIGHT"], id="height"),
    ],
)
@pytest.mark.parametrize("path", [HEATMAP, SIMILARITY])
def test_a_huge_integer_is_refused_by_its_name(
    api: httpx.Client, path: str, parameter: str, words: list[str]
) -> None:
    """Refused by the parameter's own limit, before any arithmetic: the similarity's step
    once divided max_len as a float (an OverflowError, a 500)."""
    query = {"max_len": "64", "d_model": "16", parameter: HUGE}
    answer = api.get(path, params=query)
    problem = assert_problem(answer, 422, *words)
    # the number is not quoted back whole: its count of digits says what it was
    assert "0" * 40 not in problem["detail"].replace(",", "")


def test_the_image_limits_are_settings() -> None:
    settings = Settings(max_image_width=400, max_image_height=300)
    with in_process(create_app(settings)) as http:
        assert_problem(
            http.get(f"{HEATMAP}?max_len=4&d_model=4&width=401&height=300"),
            422,
            "PE_MAX_IMAGE_WIDTH",
        )
        assert picture(http.get(f"{HEATMAP}?max_len=4&d_model=4&width=400&height=300")).shape == (
            300,
            400,
            3,
        )


def test_repeated_pictures_are_replayed_from_the_cache_budget() -> None:
    """A picture is an immutable answer: the replay layer keeps it and answers repeats."""
    with in_process(create_app(Settings())) as http:
        first = http.get(f"{HEATMAP}?max_len=32&d_model=32")
        before = cache_stats(http)
        again = http.get(f"{HEATMAP}?max_len=32&d_model=32")
        after = cache_stats(http)
    assert again.content == first.content
    assert before["responses"] == 1
    assert before["response_bytes"] > len(first.content)
    assert after["response_hits"] == before["response_hits"] + 1
    assert after["misses"] == before["misses"]


def test_without_matplotlib_pictures_answer_501(monkeypatch: pytest.MonkeyPatch) -> None:
    plots.available.cache_clear()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    try:
        with in_process(create_app(Settings())) as http:
            for path in (HEATMAP, SIMILARITY):
                problem = assert_problem(http.get(f"{path}?max_len=4&d_model=4"), 501, "plots")
                assert problem["type"] == "urn:positional-encodings:problem:plots-unavailable"
            assert http.get("/v1/encodings/sinusoidal?max_len=4&d_model=4").status_code == 200
    finally:
        plots.available.cache_clear()


def test_pictures_are_in_the_committed_contract(api: httpx.Client) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert "image/png" in paths[HEATMAP]["get"]["responses"]["200"]["content"]
    assert "image/png" in paths[SIMILARITY]["get"]["responses"]["200"]["content"]
    assert "/" not in paths


def test_identical_concurrent_pictures_are_drawn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six identical heatmaps asked for at once share one drawing (the real one, counted)."""
    drawn: list[int] = []
    real = plots.heatmap

    def counted(*args: Any, **kwargs: Any) -> bytes:
        drawn.append(1)
        time.sleep(0.3)  # the others arrive while it is drawn
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "heatmap", counted)
    with (
        in_process(create_app(Settings())) as http,
        ThreadPoolExecutor(6) as pool,
    ):
        answers = list(pool.map(lambda _: http.get(f"{HEATMAP}?max_len=64&d_model=64"), range(6)))
    assert [a.status_code for a in answers] == [200] * 6
    assert len({a.content for a in answers}) == 1
    assert drawn == [1]

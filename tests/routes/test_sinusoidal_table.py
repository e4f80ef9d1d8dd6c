"""``GET /v1/encodings/sinusoidal`` over HTTP, against a real ``python -m service`` process
and the in-process app: formats, blocks, validators, limits and problems."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from service.app import create_app
from service.encodings import registry
from service.encodings.registry import DTYPES
from service.encodings.sinusoidal import SinusoidalKey
from service.settings import Settings
from tests import oracle
from tests.support import TABLE, assert_problem, cache_stats, in_process, load, sample, table_url


def test_the_seeds_worked_example_over_http(api: httpx.Client) -> None:
    response = api.get(table_url(max_len=4, d_model=4, base=100, dtype="float64"))
    assert response.status_code == 200
    np.testing.assert_allclose(load(response), oracle.ROBOT, rtol=0, atol=5e-9)


def test_json_document(api: httpx.Client) -> None:
    response = api.get(table_url(max_len=3, d_model=2))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-length"] == str(response.num_bytes_downloaded)
    assert response.json() == {
        "max_len": 3,
        "d_model": 2,
        "base": 10000.0,
        "layout": "interleaved",
        "dtype": "float32",
        "start": 0,
        "stop": 3,
        "dim_start": 0,
        "dim_stop": 2,
        "shape": [3, 2],
        "data": [[0.0, 1.0], [0.84147096, 0.5403023], [0.9092974, -0.41614684]],
    }
    assert b"0.84147096," in response.content  # shortest float32 text, not 0.8414709568023682


@pytest.mark.parametrize(
    ("how", "media_type"),
    [
        pytest.param({"params": "&format=json"}, "application/json", id="format=json"),
        pytest.param({"params": "&format=npy"}, "application/x-npy", id="format=npy"),
        pytest.param({"params": "&format=raw"}, "application/octet-stream", id="format=raw"),
        pytest.param({"accept": "application/json"}, "application/json", id="accept-json"),
        pytest.param({"accept": "application/x-npy"}, "application/x-npy", id="accept-npy"),
        pytest.param(
            {"accept": "application/octet-stream"}, "application/octet-stream", id="accept-raw"
        ),
        pytest.param(
            {"accept": "application/json;q=0.2, application/x-npy;q=0.9"},
            "application/x-npy",
            id="accept-q",
        ),
        pytest.param({"accept": "*/*"}, "application/json", id="accept-any"),
        pytest.param(
            {"params": "&format=raw", "accept": "application/json"},
            "application/octet-stream",
            id="format-beats-accept",
        ),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_formats(api: httpx.Client, how: dict[str, str], media_type: str, dtype: str) -> None:
    url = table_url(max_len=50, d_model=7, dtype=dtype) + how.get("params", "")
    headers = {"accept": how["accept"]} if "accept" in how else {}
    response = api.get(url, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.headers["content-length"] == str(response.num_bytes_downloaded)
    table = load(response)
    assert table.dtype == np.dtype(dtype)
    assert np.array_equal(table, registry.rows(SinusoidalKey(7, dtype=dtype), 0, 50))  # type: ignore[arg-type]
    truth = oracle.table(50, 7, 10000.0)
    bound = {"float64": 1e-12, "float32": 2.0**-23, "float16": 2.0**-11}[dtype]
    assert np.max(np.abs(table.astype(np.float64) - truth)) <= bound
    if media_type == "application/octet-stream":
        assert response.headers["x-shape"] == "50,7"
        assert response.headers["x-dtype"] == dtype


@pytest.mark.parametrize(
    "params",
    sample(
        [
            pytest.param({"base": 100}, id="base"),
            pytest.param({"base": 2.5, "layout": "split"}, id="split"),
            pytest.param({"start": 5, "stop": 17}, id="rows"),
            pytest.param({"dim_start": 2, "dim_stop": 9}, id="columns"),
            pytest.param({"start": 31, "dim_start": 10}, id="to-the-end"),
            pytest.param({"start": 12, "stop": 13, "dim_start": 3, "dim_stop": 4}, id="one-entry"),
            pytest.param(
                {
                    "layout": "split",
                    "start": 3,
                    "stop": 20,
                    "dim_start": 4,
                    "dim_stop": 8,
                    "dtype": "float64",
                },
                id="everything",
            ),
        ],
        2,
    ),
)
@pytest.mark.parametrize("fmt", ["json", "npy", "raw"])
def test_every_parameter(api: httpx.Client, params: dict[str, Any], fmt: str) -> None:
    max_len, d_model = 40, 11
    response = api.get(table_url(max_len=max_len, d_model=d_model, format=fmt, **params))
    assert response.status_code == 200, response.text
    full = oracle.table(
        max_len, d_model, float(params.get("base", 10000.0)), params.get("layout", "interleaved")
    )
    block = full[
        params.get("start", 0) : params.get("stop", max_len),
        params.get("dim_start", 0) : params.get("dim_stop", d_model),
    ]
    table = load(response)
    assert table.shape == block.shape
    assert np.max(np.abs(table.astype(np.float64) - block)) <= 2.0**-23
    if fmt == "json":
        document = response.json()
        assert document["shape"] == list(block.shape)
        assert (document["start"], document["stop"]) == (
            params.get("start", 0),
            params.get("stop", max_len),
        )


def test_a_slice_is_the_same_block_of_the_full_table(api: httpx.Client) -> None:
    full = load(api.get(table_url(max_len=300, d_model=64, format="npy")))
    part = load(
        api.get(
            table_url(
                max_len=300, d_model=64, format="npy", start=100, stop=200, dim_start=7, dim_stop=33
            )
        )
    )
    assert np.array_equal(part, full[100:200, 7:33])


def test_caching_headers(api: httpx.Client) -> None:
    response = api.get(table_url(max_len=8, d_model=8))
    etag = response.headers["etag"]
    assert etag[0] == etag[-1] == '"'  # strong: no W/ prefix
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["vary"] == "Accept, Accept-Encoding"
    assert api.get(table_url(max_len=8, d_model=8)).headers["etag"] == etag
    explicit = api.get(table_url(max_len=8, d_model=8, format="npy"))
    assert "vary" not in explicit.headers  # the format parameter fixes the representation
    others = {
        api.get(url).headers["etag"]
        for url in [
            table_url(max_len=8, d_model=8, format="json"),
            table_url(max_len=8, d_model=8, format="npy"),
            table_url(max_len=8, d_model=8, format="raw"),
            table_url(max_len=9, d_model=8),
            table_url(max_len=8, d_model=8, base=100),
            table_url(max_len=8, d_model=8, dtype="float64"),
            table_url(max_len=8, d_model=8, layout="split"),
            table_url(max_len=8, d_model=8, start=1),
            table_url(max_len=8, d_model=8, dim_stop=4),
        ]
    }
    assert len(others) == 9


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("{etag}", id="exact"),
        pytest.param("W/{etag}", id="weak"),
        pytest.param('"other", {etag}', id="list"),
        pytest.param("*", id="star"),
    ],
)
def test_if_none_match_gets_304(api: httpx.Client, header: str) -> None:
    url = table_url(max_len=16, d_model=16, format="npy")
    etag = api.get(url).headers["etag"]
    response = api.get(url, headers={"if-none-match": header.format(etag=etag)})
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"


def test_a_stale_tag_gets_the_table(api: httpx.Client) -> None:
    response = api.get(table_url(max_len=16, d_model=16), headers={"if-none-match": '"stale"'})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("d_model=4", "max_len", id="max_len-missing"),
        pytest.param("max_len=4", "d_model", id="d_model-missing"),
        pytest.param("max_len=0&d_model=4", "max_len", id="max_len-zero"),
        pytest.param("max_len=-3&d_model=4", "max_len", id="max_len-negative"),
        pytest.param("max_len=abc&d_model=4", "max_len", id="max_len-text"),
        pytest.param("max_len=1.5&d_model=4", "max_len", id="max_len-fraction"),
        pytest.param("max_len=4&d_model=0", "d_model", id="d_model-zero"),
        pytest.param("max_len=4&d_model=4&base=1", "base", id="base-one"),
        pytest.param("max_len=4&d_model=4&base=0.5", "base", id="base-below-one"),
        pytest.param("max_len=4&d_model=4&base=-10", "base", id="base-negative"),
        pytest.param("max_len=4&d_model=4&base=nan", "base", id="base-nan"),
        pytest.param("max_len=4&d_model=4&base=inf", "base", id="base-inf"),
        pytest.param("max_len=4&d_model=4&base=1e400", "base", id="base-overflow"),
        pytest.param("max_len=4&d_model=4&layout=diagonal", "layout", id="layout"),
        pytest.param("max_len=4&d_model=4&dtype=int8", "dtype", id="dtype"),
        pytest.param("max_len=4&d_model=4&start=4", "start", id="start-past-end"),
        pytest.param("max_len=4&d_model=4&start=-1", "start", id="start-negative"),
        pytest.param("max_len=4&d_model=4&stop=5", "stop", id="stop-past-end"),
        pytest.param("max_len=4&d_model=4&start=2&stop=2", "stop", id="stop-not-after-start"),
        pytest.param("max_len=4&d_model=4&stop=0", "stop", id="stop-zero"),
        pytest.param("max_len=4&d_model=4&dim_start=4", "dim_start", id="dim_start-past-end"),
        pytest.param("max_len=4&d_model=4&dim_stop=5", "dim_stop", id="dim_stop-past-end"),
        pytest.param(
            "max_len=4&d_model=4&dim_start=3&dim_stop=1", "dim_stop", id="dim_stop-before-start"
        ),
        pytest.param("max_len=4&d_model=4&format=xml", "format", id="format"),
        pytest.param("max_len=4&d_model=4&dmodel=4", "dmodel", id="unknown-parameter"),
    ],
)
def test_invalid_parameters_are_named(api: httpx.Client, query: str, name: str) -> None:
    document = assert_problem(api.get(f"{TABLE}?{query}"), 422, name)
    assert name in [error["name"] for error in document["errors"]]
    assert all(error["in"] == "query" for error in document["errors"])


def test_the_element_limit_is_enforced_before_allocating(api: httpx.Client) -> None:
    before = cache_stats(api)
    response = api.get(table_url(max_len=10_000_000, d_model=50_000))
    document = assert_problem(response, 422, "PE_MAX_ELEMENTS")
    assert (document["limit"], document["requested"]) == (1 << 26, 5 * 10**11)
    assert document["setting"] == "PE_MAX_ELEMENTS"
    after = cache_stats(api)
    assert (after["misses"], after["bytes"]) == (before["misses"], before["bytes"])


def test_the_element_limit_is_on_the_rows_returned_not_the_table(api: httpx.Client) -> None:
    """max_len × d_model is far past PE_MAX_ELEMENTS; the ten rows asked for are not."""
    response = api.get(
        table_url(
            max_len=2**31 - 1,
            d_model=60_000,
            start=2**31 - 11,
            stop=2**31 - 1,
            dim_stop=4,
            format="npy",
        )
    )
    assert response.status_code == 200, response.text
    rows = registry.rows(SinusoidalKey(60_000), 2**31 - 11, 2**31 - 1)[:, :4]
    assert np.array_equal(load(response), rows)


def test_positions_are_bounded_by_pe_max_position(api: httpx.Client) -> None:
    document = assert_problem(
        api.get(table_url(max_len=2**31 + 1, d_model=4, start=2**31 - 4)), 422
    )
    assert (document["setting"], document["limit"], document["requested"]) == (
        "PE_MAX_POSITION",
        2**31 - 1,
        2**31,
    )
    assert api.get(table_url(max_len=2**31, d_model=4, start=2**31 - 4)).status_code == 200
    # the table's length, not only the rows asked for: max_len - 1 is its last position
    document = assert_problem(api.get(table_url(max_len=2**40, d_model=8, stop=2)), 422)
    assert (document["setting"], document["requested"]) == ("PE_MAX_POSITION", 2**40 - 1)
    assert "max_len - 1" in document["detail"]


def test_a_far_slice_is_the_same_block_as_near_it(api: httpx.Client) -> None:
    """Rows 999,990 .. 999,999 computed alone are the rows of the whole table, exactly."""
    far = load(
        api.get(
            table_url(max_len=1_000_000, d_model=64, start=999_990, dtype="float64", format="npy")
        )
    )
    assert far.shape == (10, 64)
    for r in range(10):
        for k in (0, 1, 31, 63):
            assert oracle.exact_error(far[r, k], 999_990 + r, k, 64, 10000.0) <= 1e-15
    around = load(
        api.get(
            table_url(max_len=1_000_100, d_model=64, start=999_980, dtype="float64", format="npy")
        )
    )
    assert np.array_equal(far, around[10:20])


@pytest.mark.parametrize(
    ("query", "setting"),
    [
        pytest.param(f"max_len={10**40}&d_model=4", "PE_MAX_ELEMENTS", id="rows"),
        pytest.param(f"max_len=10&d_model={10**40}", "PE_MAX_WIDTH", id="width"),
        pytest.param(f"max_len={10**40}&d_model={10**40}", "PE_MAX_WIDTH", id="both"),
    ],
)
def test_an_absurd_integer_is_a_limit_not_a_crash(
    api: httpx.Client, query: str, setting: str
) -> None:
    assert_problem(api.get(f"{TABLE}?{query}"), 422, setting)


def test_limits_name_their_settings(small_api: httpx.Client) -> None:
    assert_problem(small_api.get(table_url(max_len=1000, d_model=101)), 422, "PE_MAX_ELEMENTS")
    document = assert_problem(
        small_api.get(table_url(max_len=100, d_model=11)), 422, "PE_MAX_JSON_ELEMENTS"
    )
    assert document["limit"] == 1000
    assert document["setting"] == "PE_MAX_JSON_ELEMENTS"  # the name only: advice is in detail
    assert "format=npy" in document["detail"]
    assert small_api.get(table_url(max_len=100, d_model=11, format="npy")).status_code == 200
    assert small_api.get(table_url(max_len=100, d_model=11, stop=10)).status_code == 200


def test_a_table_over_the_cache_budget_is_served_uncached(small_api: httpx.Client) -> None:
    before = cache_stats(small_api)
    response = small_api.get(table_url(max_len=1000, d_model=100, format="npy", dtype="float64"))
    assert response.status_code == 200
    assert load(response).shape == (1000, 100)
    stats = cache_stats(small_api)
    assert stats["uncached"] == before["uncached"] + 1
    assert stats["misses"] == before["misses"]
    assert stats["bytes"] <= stats["budget_bytes"] == 200_000


@pytest.mark.parametrize(
    "accept",
    [
        "text/html",
        "application/xml, text/*",
        "application/json;q=0, application/x-npy;q=0, application/octet-stream;q=0",
    ],
)
def test_unacceptable_is_406(api: httpx.Client, accept: str) -> None:
    document = assert_problem(
        api.get(table_url(max_len=4, d_model=4), headers={"accept": accept}), 406, "Accept"
    )
    assert "application/x-npy" in document["available"]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("max_len=4&d_model=4&d_model=5", "d_model", id="d_model"),
        pytest.param("max_len=4&d_model=4&format=npy&format=json", "format", id="format"),
        pytest.param("max_len=4&max_len=4&d_model=4", "max_len", id="same-value-twice"),
    ],
)
def test_a_repeated_parameter_is_refused_not_last_wins(
    api: httpx.Client, query: str, name: str
) -> None:
    problem = assert_problem(api.get(f"{TABLE}?{query}"), 422, "more than once")
    assert problem["errors"][0]["name"] == name


def test_unknown_path_is_a_404_problem(api: httpx.Client) -> None:
    assert_problem(api.get("/v1/encodings/cosine"), 404, "/v1/encodings/cosine")


def test_wrong_method_is_a_405_problem(api: httpx.Client) -> None:
    response = api.delete(table_url(max_len=4, d_model=4))
    assert_problem(response, 405, "DELETE")
    assert response.headers["allow"] == "GET"


def test_cache_statistics() -> None:
    """Pages of a key are counted once: a shorter table after a longer one is all hits.
    (A fresh app: the listing holds the largest tables, and this one is small.)"""
    with in_process(create_app(Settings())) as api:
        _check_cache_statistics(api)


def test_the_cache_listing_is_bounded(api: httpx.Client) -> None:
    for base in range(30):
        api.get(table_url(max_len=1, d_model=2, base=1000 + base)).raise_for_status()
    stats = cache_stats(api)
    assert len(stats["tables"]) == 20 < 30 <= stats["tables_total"]
    sizes = [table["bytes"] for table in stats["tables"]]
    assert sizes == sorted(sizes, reverse=True)


def _check_cache_statistics(api: httpx.Client) -> None:
    before = cache_stats(api)
    api.get(table_url(max_len=64, d_model=6, base=3.5, layout="split", dtype="float16"))
    middle = cache_stats(api)
    api.get(
        table_url(max_len=32, d_model=6, base=3.5, layout="split", dtype="float16", format="npy")
    )
    stats = cache_stats(api)
    assert stats["budget_bytes"] == 512 << 20
    table = next(t for t in stats["tables"] if t["key"]["base"] == 3.5 and t["key"]["d_model"] == 6)
    assert table == {
        "family": "sinusoidal",
        "key": {
            "d_model": 6,
            "base": 3.5,
            "layout": "split",
            "dtype": "float16",
            "preset": "vaswani",
            "rounding": "exact",
        },
        "pages": 1,
        "page_rows": 16384,  # a power of two of 12-byte rows within 256 KiB
        "bytes": 16384 * 6 * 2,
    }
    assert (middle["misses"], middle["hits"]) == (before["misses"] + 1, before["hits"])
    assert (stats["misses"], stats["hits"]) == (middle["misses"], middle["hits"] + 1)


def test_health_readiness_and_docs(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    assert api.get("/readyz").json() == {"status": "ready"}
    docs = api.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()
    spec = api.get("/openapi.json").json()
    assert "/v1/encodings/sinusoidal" in spec["paths"]


def test_a_large_json_table_equals_the_binary_one(api: httpx.Client) -> None:
    """Large enough to be encoded off the event loop."""
    as_json = load(api.get(table_url(max_len=300, d_model=128, format="json")))
    assert np.array_equal(as_json, load(api.get(table_url(max_len=300, d_model=128, format="npy"))))

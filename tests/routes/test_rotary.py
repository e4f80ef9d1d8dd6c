"""``GET /v1/encodings/rotary`` and ``POST /v1/encodings/rotary/from-config`` over HTTP, in
process: formats (cos and sin as JSON and npz members, stacked as npy and raw), negotiation,
validators, slices, the scalings' parameters, limits, and models' ``config.json``."""

from __future__ import annotations

import io
import math
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray

from service.app import create_app
from service.encodings import registry, scalings
from service.encodings.registry import DTYPES, DType
from service.encodings.rotary import RotaryKey
from service.settings import POSITION_CEILING, Settings
from tests.support import NPY, NPZ, RAW, assert_problem, client_of, in_process, sample

ROTARY = "/v1/encodings/rotary"
FROM_CONFIG = ROTARY + "/from-config"
JSON = {"content-type": "application/json"}
IMMUTABLE = "public, max-age=31536000, immutable"
Tables = tuple[NDArray[Any], NDArray[Any]]


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    """The app with default settings, in process; an unexpected error is a 500 answer."""
    with client_of(in_process_app, raise_errors=False) as client:
        yield client


@pytest.fixture(scope="module")
def small(small_in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    """The same with small limits (``SMALL_LIMITS``)."""
    with client_of(small_in_process_app, raise_errors=False) as c:
        yield c


def url(path: str = ROTARY, /, **params: Any) -> str:
    return path + "?" + urllib.parse.urlencode(params)


def tables(response: httpx.Response) -> Tables:
    """cos and sin from a table answer in any of its formats, checking the form of each."""
    assert response.status_code == 200, response.text
    kind = response.headers["content-type"]
    if kind == "application/json":
        document = orjson.loads(response.content)
        cos = np.array(document["cos"], dtype=document["dtype"])
        sin = np.array(document["sin"], dtype=document["dtype"])
        assert document["shape"] == [2, *cos.shape]
        return cos, sin
    if kind == NPZ:
        with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
            assert sorted(archive.files) == ["cos", "sin"]
            return np.asarray(archive["cos"]), np.asarray(archive["sin"])
    if kind == NPY:
        stacked = np.load(io.BytesIO(response.content), allow_pickle=False)
    else:
        assert kind == RAW, kind
        shape = tuple(int(n) for n in response.headers["x-shape"].split(","))
        dtype = np.dtype(response.headers["x-dtype"]).newbyteorder("<")
        stacked = np.frombuffer(response.content, dtype=dtype).reshape(shape)
    assert stacked.ndim == 3
    assert stacked.shape[0] == 2
    return stacked[0], stacked[1]


def expected(key: RotaryKey, start: int, stop: int) -> Tables:
    rows = registry.rows(key, start, stop)
    return rows[:, : key.rotary_dim], rows[:, key.rotary_dim :]


def assert_tables(got: Tables, want: Tables) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        assert g.shape == w.shape
        assert np.array_equal(g, w)


def key_of(
    scaling: scalings.Scaling = "none",
    given: Mapping[str, Any] | None = None,
    rotary_dim: int = 8,
    max_len: int = 1,
    **fields: Any,
) -> RotaryKey:
    params = scalings.resolve(scaling, dict(given or {}), rotary_dim, max_len)
    return RotaryKey(rotary_dim, scaling=scaling, params=params, **fields)


def test_json_document(http: httpx.Client) -> None:
    response = http.get(url(max_len=3, head_dim=4))
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "max_len": 3,
        "head_dim": 4,
        "base": 10000.0,
        "partial_rotary_factor": 1.0,
        "rotary_dim": 4,
        "convention": "half",
        "scaling": "none",
        "attention_factor": 1.0,
        "rounding": "library",
        "dtype": "float32",
        "start": 0,
        "stop": 3,
        "shape": [2, 3, 4],
        "cos": [
            [1.0, 1.0, 1.0, 1.0],
            [0.5403023, 0.99995, 0.5403023, 0.99995],
            [-0.41614684, 0.9998, -0.41614684, 0.9998],
        ],
        "sin": [
            [0.0, 0.0, 0.0, 0.0],
            [0.84147096, 0.009999833, 0.84147096, 0.009999833],
            [0.9092974, 0.019998666, 0.9092974, 0.019998666],
        ],
    }


def test_json_reports_the_scalings_parameters(http: httpx.Client) -> None:
    params = {
        "scaling": "yarn",
        "factor": 4,
        "original_max_position_embeddings": 1024,
        "beta_fast": 16,
    }
    document = http.get(url(max_len=2, head_dim=16, convention="interleaved", **params)).json()
    assert {k: document[k] for k in ("scaling", "factor", "beta_fast", "convention")} == {
        "scaling": "yarn",
        "factor": 4.0,
        "beta_fast": 16.0,
        "convention": "interleaved",
    }
    assert document["original_max_position_embeddings"] == 1024
    assert document["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1, rel=1e-15)


@pytest.mark.parametrize(
    ("how", "media_type"),
    [
        pytest.param({"format": "json"}, "application/json", id="format=json"),
        pytest.param({"format": "npz"}, NPZ, id="format=npz"),
        pytest.param({"format": "npy"}, NPY, id="format=npy"),
        pytest.param({"format": "raw"}, RAW, id="format=raw"),
        pytest.param({"accept": "application/json"}, "application/json", id="accept-json"),
        pytest.param({"accept": NPZ}, NPZ, id="accept-npz"),
        pytest.param({"accept": NPY}, NPY, id="accept-npy"),
        pytest.param({"accept": RAW}, RAW, id="accept-raw"),
        pytest.param(
            {"accept": "application/json;q=0.5, application/x-npz;q=0.9"}, NPZ, id="accept-q"
        ),
        pytest.param({"accept": "*/*"}, "application/json", id="accept-any"),
        pytest.param({}, "application/json", id="default"),
        pytest.param({"format": "npz", "accept": "application/json"}, NPZ, id="format-wins"),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_formats(http: httpx.Client, how: dict[str, str], media_type: str, dtype: DType) -> None:
    query: dict[str, Any] = {"max_len": 50, "head_dim": 12, "dtype": dtype}
    if "format" in how:
        query["format"] = how["format"]
    headers = {"accept": how["accept"]} if "accept" in how else {}
    response = http.get(url(**query), headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    got = tables(response)
    assert_tables(got, expected(RotaryKey(12, dtype=dtype), 0, 50))
    if media_type == RAW:
        assert response.headers["x-shape"] == "2,50,12"
        assert response.headers["x-dtype"] == dtype
    if media_type == NPY:
        assert np.load(io.BytesIO(response.content)).shape == (2, 50, 12)


def test_npz_is_offered_only_when_asked_for(http: httpx.Client) -> None:
    """Negotiation offers all four formats; a client that takes anything gets JSON."""
    response = http.get(url(max_len=2, head_dim=4), headers={"accept": "application/*"})
    assert response.headers["content-type"] == "application/json"
    assert response.headers["vary"] == "Accept, Accept-Encoding"
    npz = http.get(url(max_len=2, head_dim=4), headers={"accept": "application/x-npz"})
    assert npz.headers["vary"] == "Accept"
    explicit = http.get(url(max_len=2, head_dim=4, format="npz"))
    assert "vary" not in explicit.headers


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "application/x-npz;q=0"])
def test_unacceptable_is_406(http: httpx.Client, accept: str) -> None:
    document = assert_problem(
        http.get(url(max_len=4, head_dim=4), headers={"accept": accept}), 406, "Accept"
    )
    assert NPZ in document["available"]


def test_caching_headers(http: httpx.Client) -> None:
    base: dict[str, Any] = {"max_len": 8, "head_dim": 8, "format": "npz"}
    response = http.get(url(**base))
    etag = response.headers["etag"]
    assert etag[0] == etag[-1] == '"'  # strong
    assert response.headers["cache-control"] == IMMUTABLE
    assert http.get(url(**base)).headers["etag"] == etag
    variants: list[dict[str, Any]] = [
        {},
        {"format": "npy"},
        {"format": "json"},
        {"max_len": 9},
        {"base": 500000},
        {"convention": "interleaved"},
        {"dtype": "float64"},
        {"rounding": "exact"},
        {"partial_rotary_factor": 0.5},
        {"scaling": "linear", "factor": 2},
        {"scaling": "linear", "factor": 3},
        {"start": 1},
        {"stop": 7},
    ]
    etags = {http.get(url(**{**base, **change})).headers["etag"] for change in variants}
    assert len(etags) == len(variants)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("{etag}", id="exact"),
        pytest.param("W/{etag}", id="weak"),
        pytest.param('"other", {etag}', id="list"),
        pytest.param("*", id="star"),
    ],
)
def test_if_none_match_gets_304(http: httpx.Client, header: str) -> None:
    query = url(max_len=16, head_dim=8, format="npz", scaling="ntk", factor=2)
    etag = http.get(query).headers["etag"]
    response = http.get(query, headers={"if-none-match": header.format(etag=etag)})
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag
    assert response.headers["cache-control"] == IMMUTABLE


def test_a_stale_tag_gets_the_table(http: httpx.Client) -> None:
    response = http.get(url(max_len=4, head_dim=4), headers={"if-none-match": '"stale"'})
    assert response.status_code == 200


_LONGROPE = {
    "scaling": "longrope",
    "original_max_position_embeddings": 64,
    "short_factor": "1,1.5,2,3,4,6,8,12",
    "long_factor": "2,3,4,6,8,12,16,24",
    "factor": 4,
}


@pytest.mark.parametrize(
    "params",
    sample(
        [
            pytest.param({}, id="none"),
            pytest.param({"convention": "interleaved", "dtype": "float64"}, id="interleaved"),
            pytest.param(
                {
                    "scaling": "yarn",
                    "factor": 8,
                    "original_max_position_embeddings": 64,
                    "rounding": "exact",
                },
                id="yarn-exact",
            ),
            pytest.param(_LONGROPE, id="longrope"),
            pytest.param(
                {"scaling": "dynamic", "factor": 2, "max_position_embeddings": 100}, id="dyn"
            ),
            pytest.param({"partial_rotary_factor": 0.5, "dtype": "float16"}, id="partial"),
        ],
        2,
    ),
)
@pytest.mark.parametrize("fmt", ["json", "npz", "npy", "raw"])
def test_a_slice_is_the_same_rows_of_the_whole_table(
    http: httpx.Client, params: dict[str, Any], fmt: str
) -> None:
    query = {"max_len": 300, "head_dim": 16, "format": fmt, **params}
    whole = tables(http.get(url(**query)))
    for start, stop in [(0, 1), (17, 90), (299, 300), (100, None)]:
        bounds: dict[str, Any] = (
            {"start": start} if stop is None else {"start": start, "stop": stop}
        )
        response = http.get(url(**query, **bounds))
        part = tables(response)
        assert_tables(part, (whole[0][start:stop], whole[1][start:stop]))
        if fmt == "json":
            document = response.json()
            assert (document["start"], document["stop"]) == (start, stop or 300)


def test_the_whole_table_of_a_scaling_is_its_keys_rows(http: httpx.Client) -> None:
    given = {"factor": 8.0, "original_max_position_embeddings": 64}
    response = http.get(
        url(max_len=200, head_dim=16, scaling="yarn", rounding="exact", format="npz", **given)
    )
    key = key_of("yarn", given, 16, 200, rounding="exact")
    assert_tables(tables(response), expected(key, 0, 200))


@pytest.mark.parametrize(
    ("head_dim", "factor", "rotary_dim"),
    [
        pytest.param(64, 0.25, 16, id="64x0.25"),
        pytest.param(80, 0.4, 32, id="80x0.4"),
        pytest.param(96, 0.3, 28, id="96x0.3-truncates"),  # int(28.799999999999997)
        pytest.param(128, 0.75, 96, id="128x0.75-phi4"),
    ],
)
def test_partial_rotary_factor(
    http: httpx.Client, head_dim: int, factor: float, rotary_dim: int
) -> None:
    query = url(max_len=10, head_dim=head_dim, partial_rotary_factor=factor, dtype="float64")
    response = http.get(query)
    document = response.json()
    assert document["rotary_dim"] == rotary_dim
    assert document["shape"] == [2, 10, rotary_dim]
    assert_tables(tables(response), expected(RotaryKey(rotary_dim, dtype="float64"), 0, 10))
    raw = http.get(query + "&format=raw")
    assert raw.headers["x-shape"] == f"2,10,{rotary_dim}"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("head_dim=5", "head_dim", id="odd-head_dim"),
        pytest.param("head_dim=1", "head_dim", id="head_dim-1"),
        pytest.param("head_dim=10&partial_rotary_factor=0.5", "partial_rotary_factor", id="5"),
        pytest.param("head_dim=12&partial_rotary_factor=0.25", "partial_rotary_factor", id="3"),
        pytest.param("head_dim=4&partial_rotary_factor=0.25", "partial_rotary_factor", id="1"),
    ],
)
def test_an_odd_rotary_dimension_names_its_parameter(
    http: httpx.Client, query: str, name: str
) -> None:
    document = assert_problem(http.get(f"{ROTARY}?max_len=4&{query}"), 422, name, "even")
    assert [error["name"] for error in document["errors"]] == [name]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("factor=2", "factor", id="none-factor"),
        pytest.param("scaling=linear&factor=2&beta_fast=3", "beta_fast", id="linear-beta_fast"),
        pytest.param(
            "scaling=ntk&factor=2&original_max_position_embeddings=8",
            "original_max_position_embeddings",
            id="ntk-original",
        ),
        pytest.param(
            "scaling=llama3&factor=8&low_freq_factor=1&high_freq_factor=4"
            "&original_max_position_embeddings=8&mscale=1",
            "mscale",
            id="llama3-mscale",
        ),
        pytest.param(
            "scaling=yarn&original_max_position_embeddings=8&factor=2&short_factor=1,1",
            "short_factor",
            id="yarn-short_factor",
        ),
        pytest.param("scaling=none&seq_len=10", "seq_len", id="none-seq_len"),
        pytest.param(
            "scaling=dynamic&factor=2&max_position_embeddings=8&low_freq_factor=1",
            "low_freq_factor",
            id="dynamic-low_freq_factor",
        ),
    ],
)
def test_a_parameter_the_scaling_does_not_take(http: httpx.Client, query: str, name: str) -> None:
    document = assert_problem(
        http.get(f"{ROTARY}?max_len=4&head_dim=8&{query}"), 422, name, "not a parameter"
    )
    assert [error["name"] for error in document["errors"]] == [name]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("scaling=linear", "factor", id="linear"),
        pytest.param("scaling=ntk", "factor", id="ntk"),
        pytest.param("scaling=dynamic&factor=2", "max_position_embeddings", id="dynamic"),
        pytest.param("scaling=yarn&factor=2", "original_max_position_embeddings", id="yarn"),
        pytest.param(
            "scaling=yarn&original_max_position_embeddings=8", "factor", id="yarn-no-factor"
        ),
        pytest.param(
            "scaling=longrope&short_factor=1,1,1,1&original_max_position_embeddings=8&factor=2",
            "long_factor",
            id="longrope",
        ),
        pytest.param(
            "scaling=llama3&factor=8&low_freq_factor=1&original_max_position_embeddings=8",
            "high_freq_factor",
            id="llama3",
        ),
    ],
)
def test_a_missing_parameter_is_named(http: httpx.Client, query: str, name: str) -> None:
    document = assert_problem(http.get(f"{ROTARY}?max_len=4&head_dim=8&{query}"), 422, name)
    assert [error["name"] for error in document["errors"]] == [name]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("head_dim=8", "max_len", id="max_len-missing"),
        pytest.param("max_len=4", "head_dim", id="head_dim-missing"),
        pytest.param("max_len=0&head_dim=8", "max_len", id="max_len-zero"),
        pytest.param("max_len=4&head_dim=0", "head_dim", id="head_dim-zero"),
        pytest.param("max_len=4&head_dim=8&base=1", "base", id="base-one"),
        pytest.param("max_len=4&head_dim=8&base=nan", "base", id="base-nan"),
        pytest.param("max_len=4&head_dim=8&partial_rotary_factor=0", "partial_rotary_factor"),
        pytest.param("max_len=4&head_dim=8&partial_rotary_factor=1.5", "partial_rotary_factor"),
        pytest.param("max_len=4&head_dim=8&partial_rotary_factor=nan", "partial_rotary_factor"),
        pytest.param("max_len=4&head_dim=8&convention=split", "convention", id="convention"),
        pytest.param("max_len=4&head_dim=8&scaling=su", "scaling", id="scaling"),
        pytest.param("max_len=4&head_dim=8&rounding=fast", "rounding", id="rounding"),
        pytest.param("max_len=4&head_dim=8&dtype=bfloat16", "dtype", id="dtype"),
        pytest.param("max_len=4&head_dim=8&format=safetensor", "format", id="format"),
        pytest.param("max_len=4&head_dim=8&scaling=linear&factor=0", "factor", id="factor-0"),
        pytest.param("max_len=4&head_dim=8&scaling=linear&factor=-2", "factor", id="factor-neg"),
        pytest.param("max_len=4&head_dim=8&scaling=linear&factor=inf", "factor", id="factor-inf"),
        pytest.param("max_len=4&head_dim=8&start=4", "start", id="start-past-end"),
        pytest.param("max_len=4&head_dim=8&stop=5", "stop", id="stop-past-end"),
        pytest.param("max_len=4&head_dim=8&start=2&stop=2", "stop", id="empty-slice"),
        pytest.param(
            "max_len=4&head_dim=8&scaling=llama3&factor=8&low_freq_factor=4&high_freq_factor=1"
            "&original_max_position_embeddings=8",
            "high_freq_factor",
            id="llama3-high-below-low",
        ),
        pytest.param(
            "max_len=4&head_dim=8&scaling=yarn&factor=2&original_max_position_embeddings=8"
            "&attention_factor=5000",
            "attention_factor",
            id="attention-too-large",
        ),
        pytest.param("max_len=4&head_dim=2&scaling=ntk&factor=2", "head_dim", id="ntk-dim-2"),
        pytest.param("max_len=4&head_dim=8&d_model=8", "d_model", id="unknown-d_model"),
        pytest.param("max_len=4&head_dim=8&theta=10", "theta", id="unknown-theta"),
        pytest.param("max_len=4&head_dim=8&Factor=2", "Factor", id="unknown-case"),
    ],
)
def test_invalid_parameters_are_named(http: httpx.Client, query: str, name: str) -> None:
    document = assert_problem(http.get(f"{ROTARY}?{query}"), 422, name)
    assert name in [error["name"] for error in document["errors"]]
    assert all(error["in"] == "query" for error in document["errors"])


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("max_len=4&head_dim=8&head_dim=8", "head_dim", id="head_dim"),
        pytest.param("max_len=4&head_dim=8&scaling=linear&factor=2&factor=3", "factor", id="f"),
    ],
)
def test_a_repeated_parameter_is_refused(http: httpx.Client, query: str, name: str) -> None:
    problem = assert_problem(http.get(f"{ROTARY}?{query}"), 422, "more than once")
    assert problem["errors"][0]["name"] == name


def longrope(short: str, long: str = "1,1,1,1", head_dim: int = 8) -> str:
    return url(
        max_len=4,
        head_dim=head_dim,
        scaling="longrope",
        original_max_position_embeddings=2,
        factor=2,
        short_factor=short,
        long_factor=long,
    )


@pytest.mark.parametrize(
    ("query", "name", "words"),
    [
        pytest.param(longrope("1,1,1"), "short_factor", "needs 4", id="too-few"),
        pytest.param(longrope("1,1,1,1,1"), "short_factor", "needs 4", id="too-many"),
        pytest.param(longrope("1,1,1,1", "1,1"), "long_factor", "needs 4", id="long-too-few"),
        pytest.param(longrope("1,1,a,1"), "short_factor", "numbers", id="a-letter"),
        pytest.param(longrope("1,,1,1"), "short_factor", "numbers", id="an-empty-item"),
        pytest.param(longrope(""), "short_factor", "", id="empty"),
        pytest.param(longrope("1;1;1;1"), "short_factor", "numbers", id="semicolons"),
        pytest.param(longrope("1,nan,1,1"), "short_factor", "positive", id="nan"),
        pytest.param(longrope("1,inf,1,1"), "short_factor", "positive", id="inf"),
        pytest.param(longrope("1,-1,1,1"), "short_factor", "positive", id="negative"),
        pytest.param(longrope("1,0,1,1"), "short_factor", "positive", id="zero"),
        pytest.param(longrope("1,1,1," + "9" * 400), "short_factor", "", id="400-digits"),
        pytest.param(longrope(",".join(["1"] * 9000)), "short_factor", "8192", id="9000"),
        pytest.param(longrope("1,1,1,1", "[1,1,1,1]"), "long_factor", "numbers", id="brackets"),
    ],
)
def test_longrope_factors_are_checked(
    http: httpx.Client, query: str, name: str, words: str
) -> None:
    document = assert_problem(http.get(query), 422, name, words)
    assert [error["name"] for error in document["errors"]] == [name]


def test_longrope_factors_as_given_are_used(http: httpx.Client) -> None:
    response = http.get(longrope("1,1.5,2,4", "3,3,3,3.5", head_dim=8) + "&format=npz")
    given = {
        "original_max_position_embeddings": 2,
        "factor": 2,
        "short_factor": [1, 1.5, 2, 4],
        "long_factor": [3, 3, 3, 3.5],
    }
    assert_tables(tables(response), expected(key_of("longrope", given, 8, 4), 0, 4))


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param(f"max_len={'9' * 5000}&head_dim=8", "max_len", id="max_len-5000"),
        pytest.param(f"max_len={'9' * 400}&head_dim=8", "max_len", id="max_len-400"),
        pytest.param(f"max_len=4&head_dim={'9' * 5000}", "head_dim", id="head_dim-5000"),
        pytest.param(f"max_len=4&head_dim={'9' * 400}", "head_dim", id="head_dim-400"),
        pytest.param(f"max_len=4&head_dim={10**40}", "head_dim", id="head_dim-10^40"),
        pytest.param(f"max_len=4&head_dim=8&base=1{'0' * 5000}", "base", id="base-5000"),
        pytest.param(
            f"max_len=4&head_dim=8&scaling=linear&factor={'9' * 5000}", "factor", id="factor"
        ),
        pytest.param(f"max_len=4&head_dim=8&start={'9' * 400}", "start", id="start-400"),
        pytest.param(
            f"max_len=4&head_dim=8&scaling=dynamic&factor=2&max_position_embeddings=2"
            f"&seq_len={'9' * 400}",
            "seq_len",
            id="seq_len-400",
        ),
        pytest.param(
            f"max_len=4&head_dim=8&scaling=yarn&factor=2&original_max_position_embeddings="
            f"{'9' * 400}",
            "original_max_position_embeddings",
            id="original-400",
        ),
    ],
)
def test_huge_numbers_of_digits_are_422_not_500(http: httpx.Client, query: str, name: str) -> None:
    document = assert_problem(http.get(f"{ROTARY}?{query}"), 422, name)
    assert name in [error["name"] for error in document["errors"]]


def test_a_long_fraction_is_only_a_number(http: httpx.Client) -> None:
    response = http.get(url(max_len=2, head_dim=4, scaling="linear", factor="0." + "1" * 5000))
    assert response.status_code == 200, response.text
    assert response.json()["factor"] == pytest.approx(1 / 9, rel=1e-15)


def test_the_element_limit_is_checked_before_computing(http: httpx.Client) -> None:
    document = assert_problem(http.get(url(max_len=10_000_000, head_dim=4096)), 422)
    assert document["setting"] == "PE_MAX_ELEMENTS"
    assert (document["limit"], document["requested"]) == (1 << 26, 10_000_000 * 2 * 4096)
    assert "PE_MAX_ELEMENTS" in document["detail"]


def test_the_element_limit_counts_the_rotary_part(small: httpx.Client) -> None:
    """rows × 2 × rotary_dim: a quarter of a 64-wide head fits where the whole does not."""
    query = {"max_len": 1000, "head_dim": 64, "format": "npy"}
    document = assert_problem(small.get(url(**query)), 422, "PE_MAX_ELEMENTS")
    assert (document["limit"], document["requested"]) == (100_000, 1000 * 128)
    assert small.get(url(**query, partial_rotary_factor=0.25)).status_code == 200


def test_the_element_limit_is_on_the_rows_returned(http: httpx.Client) -> None:
    stop = POSITION_CEILING + 1
    response = http.get(url(max_len=stop, head_dim=4096, start=stop - 3, format="npz"))
    assert_tables(tables(response), expected(RotaryKey(4096), stop - 3, stop))


def test_positions_are_bounded_by_pe_max_position() -> None:
    with in_process(create_app(Settings(max_position=1000))) as client:
        document = assert_problem(client.get(url(max_len=1002, head_dim=8, stop=2)), 422)
        assert (document["setting"], document["limit"], document["requested"]) == (
            "PE_MAX_POSITION",
            1000,
            1001,
        )
        assert client.get(url(max_len=1001, head_dim=8, start=999)).status_code == 200


def test_the_json_element_limit(small: httpx.Client) -> None:
    document = assert_problem(small.get(url(max_len=100, head_dim=8)), 422, "PE_MAX_JSON_ELEMENTS")
    assert (document["limit"], document["requested"]) == (1000, 100 * 16)
    assert "format=npy" in document["detail"]
    assert small.get(url(max_len=100, head_dim=8, format="npz")).status_code == 200
    assert small.get(url(max_len=100, head_dim=8, stop=60)).status_code == 200


def test_a_large_json_table_equals_the_binary_one(http: httpx.Client) -> None:
    """Large enough to be encoded off the event loop, and gzipped on the way."""
    query = {"max_len": 200, "head_dim": 64, "scaling": "linear", "factor": 2}
    as_json = http.get(url(**query, format="json"), headers={"accept-encoding": "gzip"})
    assert as_json.headers["content-encoding"] == "gzip"
    assert_tables(tables(as_json), tables(http.get(url(**query, format="npz"))))


# -- from-config ---------------------------------------------------------------------------

LLAMA_3_1 = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 896,
    "num_attention_heads": 14,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
}
PHI3_SHORT = [round(1.0 + 0.01 * k, 2) for k in range(48)]
PHI3_LONG = [round(1.5 + 0.5 * k, 2) for k in range(48)]
PHI3 = {
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG},
}
DEEPSEEK = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "head_dim": 64,
    "qk_rope_head_dim": 64,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 0.8,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}
TRANSFORMERS_5 = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
        "partial_rotary_factor": 0.5,
    },
}
PYTHIA = {
    "architectures": ["GPTNeoXForCausalLM"],
    "hidden_size": 512,
    "num_attention_heads": 8,
    "rotary_pct": 0.25,
    "rotary_emb_base": 10000,
    "max_position_embeddings": 2048,
}
CONFIGS = [
    pytest.param(
        LLAMA_3_1,
        {
            "max_len": 131072,
            "head_dim": 128,
            "base": 500000.0,
            "scaling": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        1.0,
        id="llama-3.1",
    ),
    pytest.param(
        QWEN2, {"max_len": 32768, "head_dim": 64, "base": 1000000.0}, 1.0, id="qwen2-no-scaling"
    ),
    pytest.param(
        PHI3,
        {
            "max_len": 131072,
            "head_dim": 96,
            "scaling": "longrope",
            "short_factor": ",".join(map(str, PHI3_SHORT)),
            "long_factor": ",".join(map(str, PHI3_LONG)),
            "original_max_position_embeddings": 4096,
            "max_position_embeddings": 131072,
        },
        math.sqrt(1 + math.log(32) / math.log(4096)),
        id="phi3-longrope",
    ),
    pytest.param(
        DEEPSEEK,
        {
            "max_len": 163840,
            "head_dim": 64,
            "scaling": "yarn",
            "factor": 40,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 0.8,
            "original_max_position_embeddings": 4096,
            "max_position_embeddings": 163840,
        },
        (0.1 * math.log(40) + 1) / (0.1 * 0.8 * math.log(40) + 1),
        id="deepseek-yarn-mscale",
    ),
    pytest.param(
        TRANSFORMERS_5,
        {
            "max_len": 131072,
            "head_dim": 128,
            "base": 1000000.0,
            "partial_rotary_factor": 0.5,
            "scaling": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
            "max_position_embeddings": 131072,
        },
        0.1 * math.log(4) + 1,
        id="rope_parameters",
    ),
    pytest.param(
        PYTHIA,
        {"max_len": 2048, "head_dim": 64, "partial_rotary_factor": 0.25},
        1.0,
        id="pythia-rotary_pct",
    ),
]


def post_config(client: httpx.Client, config: Any, /, **params: Any) -> httpx.Response:
    """``config`` (bytes as they are, else as JSON) posted to from-config with ``params``."""
    body = config if isinstance(config, bytes) else orjson.dumps(config)
    return client.post(url(FROM_CONFIG, **params), content=body, headers=JSON)


@pytest.mark.parametrize(("config", "query", "attention"), CONFIGS)
@pytest.mark.parametrize("fmt", ["json", "npz", "npy"])
def test_from_config_is_the_table_of_the_models_parameters(
    http: httpx.Client, config: dict[str, Any], query: dict[str, Any], attention: float, fmt: str
) -> None:
    """The table of a model's config.json equals the GET of its parameters, written here
    by hand from the config; its Content-Location is a GET that returns the same bytes."""
    rows = {"start": 1000, "stop": 1004, "format": fmt}
    response = post_config(http, config, **rows)
    assert response.status_code == 200, response.text
    by_hand = http.get(url(**query, **rows))
    assert by_hand.status_code == 200, by_hand.text
    assert response.content == by_hand.content
    assert response.headers["etag"] == by_hand.headers["etag"]
    location = response.headers["content-location"]
    assert location.startswith(ROTARY + "?")
    replayed = http.get(location)
    assert replayed.status_code == 200
    assert replayed.content == response.content
    assert replayed.headers["etag"] == response.headers["etag"]
    if fmt == "json":
        document = response.json()
        assert document["attention_factor"] == pytest.approx(attention, rel=1e-15)
        head_dim = query["head_dim"]
        assert document["head_dim"] == head_dim
        rotary_dim = int(head_dim * query.get("partial_rotary_factor", 1.0))
        assert document["rotary_dim"] == rotary_dim
        assert document["shape"] == [2, 4, rotary_dim]


def test_from_config_phi3_picks_its_factors_by_max_len(http: httpx.Client) -> None:
    """Past the original context the long factors (the config's own length), within it the
    short ones; max_len in the query overrides the config's."""
    params = {"format": "npz", "rounding": "exact", "dtype": "float64"}
    given = {
        "short_factor": PHI3_SHORT,
        "long_factor": PHI3_LONG,
        "original_max_position_embeddings": 4096,
        "max_position_embeddings": 131072,
    }
    for max_len in (131072, 4096):
        response = post_config(http, PHI3, **params, max_len=max_len, start=4000, stop=4003)
        key = key_of("longrope", given, 96, max_len, dtype="float64", rounding="exact")
        chosen = PHI3_LONG if max_len > 4096 else PHI3_SHORT
        assert dict(key.params)["ext_factors"] == tuple(chosen)
        assert_tables(tables(response), expected(key, 4000, 4003))


def test_from_config_options(http: httpx.Client) -> None:
    """The query chooses rows, convention, rounding, dtype and format."""
    params = {
        "convention": "interleaved",
        "rounding": "exact",
        "dtype": "float64",
        "format": "npz",
        "start": 5,
        "stop": 9,
    }
    response = post_config(http, QWEN2, **params)
    key = RotaryKey(64, 1e6, "interleaved", dtype="float64", rounding="exact")
    assert_tables(tables(response), expected(key, 5, 9))


def test_from_config_negotiates_the_format(http: httpx.Client) -> None:
    response = http.post(
        url(FROM_CONFIG, stop=2),
        content=orjson.dumps(QWEN2),
        headers={**JSON, "accept": "application/x-npz"},
    )
    assert response.headers["content-type"] == NPZ
    assert_tables(tables(response), expected(RotaryKey(64, 1e6), 0, 2))


def test_a_config_without_max_position_embeddings_needs_max_len(http: httpx.Client) -> None:
    config = {"head_dim": 16, "rope_theta": 10000.0}
    document = assert_problem(post_config(http, config), 422, "max_len")
    assert [error["name"] for error in document["errors"]] == ["max_len"]
    response = post_config(http, config, max_len=8, format="npz")
    assert_tables(tables(response), expected(RotaryKey(16), 0, 8))


@pytest.mark.parametrize(
    ("config", "name", "words"),
    [
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": {"rope_type": "su"}},
            "rope_scaling.rope_type",
            "'su'",
            id="rope_scaling-su",
        ),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": {"type": "xpos"}},
            "rope_scaling.rope_type",
            "'xpos'",
            id="type-xpos",
        ),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_parameters": {"rope_type": "x"}},
            "rope_parameters.rope_type",
            "'x'",
            id="rope_parameters-x",
        ),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": {"rope_type": ["a"]}},
            "rope_scaling.rope_type",
            "rope_type",
            id="a-list",
        ),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": {"rope_type": 3}},
            "rope_scaling.rope_type",
            "must be a string",
            id="a-number",
        ),
    ],
)
def test_an_unknown_rope_type_is_named(
    http: httpx.Client, config: dict[str, Any], name: str, words: str
) -> None:
    document = assert_problem(post_config(http, config), 422, "rope_type", words)
    assert [error["name"] for error in document["errors"]] == [name]


def test_a_problem_quotes_a_configs_names_cut_short(http: httpx.Client) -> None:
    """A 900 KB config of layer types was quoted whole: a 1.08 MB problem (issue 23)."""
    layers = {f"{k:05d}" + "x" * 200: {"rope_type": "default"} for k in range(4_000)}
    config = {"head_dim": 8, "max_position_embeddings": 4, "rope_parameters": layers}
    response = post_config(http, config)
    document = assert_problem(response, 422, "00000xxx", "00002xxx", "and 3,997 more", "layer")
    assert "00003" not in document["detail"]
    assert len(response.content) < 1_000
    rope_type = {"rope_type": "y" * 100_000}
    response = post_config(http, {**config, "rope_parameters": rope_type})
    assert_problem(response, 422, "rope_type", "yyy…")
    assert len(response.content) < 1_000


@pytest.mark.parametrize(
    ("body", "name"),
    [
        pytest.param(
            b'{"head_dim": 8, "max_position_embeddings": 4, "head_dim": 16}',
            "head_dim",
            id="top-level",
        ),
        pytest.param(
            b'{"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": '
            b'{"rope_type": "linear", "factor": 2, "rope_type": "default"}}',
            "rope_type",
            id="in-rope_scaling",
        ),
        pytest.param(
            b'{"head_dim": 8, "max_position_embeddings": 4, "notes": [{"a": 1, "a": 2}]}',
            "a",
            id="in-a-field-not-read",
        ),
        pytest.param(
            b'{"head_dim": 8, "max_position_embeddings": 4, "h\\u0065ad_dim": 16}',
            "head_dim",
            id="escaped",
        ),
    ],
)
def test_a_config_that_gives_a_key_twice_is_refused(
    http: httpx.Client, body: bytes, name: str
) -> None:
    """As an apply body that gives a field twice: a parser would keep the last silently."""
    document = assert_problem(post_config(http, body), 422, "more than once")
    assert document["errors"] == [
        {"name": name, "in": "body", "detail": "appears more than once in the config"}
    ]


def test_a_repeated_key_is_named_cut_short(http: httpx.Client) -> None:
    key = "k" * 100_000
    body = orjson.dumps({"head_dim": 8, "max_position_embeddings": 4})[:-1]
    body += b',"' + key.encode() + b'": 1, "' + key.encode() + b'": 2}'
    response = post_config(http, body)
    document = assert_problem(response, 422, "kkk…", "more than once")
    assert len(response.content) < 1_000
    assert document["errors"][0]["name"] == "k" * 59 + "…"


def test_a_config_nested_past_the_readers_depth_is_never_a_500(http: httpx.Client) -> None:
    """orjson reads 1,024 levels; the standard library's reader (which finds repeated
    keys) fewer on Python 3.11, where a config between the two is a 400 that says why."""
    body = b'{"head_dim": 8, "max_position_embeddings": 4, "deep": ' + b"[" * 1_020
    body += b"]" * 1_020 + b"}"
    response = post_config(http, body)
    if response.status_code != 200:  # Python 3.12 reads deeper in C
        assert_problem(response, 400, "nested too deeply")


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        pytest.param(b"not json", 400, "JSON", id="not-json"),
        pytest.param(b'{"head_dim": 8,', 400, "JSON", id="truncated"),
        pytest.param(b"", 400, "JSON", id="empty"),
        pytest.param(b'{"head_dim": NaN}', 400, "JSON", id="nan"),
        pytest.param(b'{"head_dim": 1e999}', 400, "JSON", id="infinity"),
        pytest.param(b"\xff\xfe{}", 400, "JSON", id="not-utf8"),
    ],
)
def test_a_body_that_is_not_json_is_400(
    http: httpx.Client, body: bytes, status: int, words: str
) -> None:
    assert_problem(post_config(http, body), status, words)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"[1, 2]", id="list"),
        pytest.param(b'"config"', id="string"),
        pytest.param(b"42", id="number"),
        pytest.param(b"null", id="null"),
    ],
)
def test_a_config_that_is_not_an_object_is_422(http: httpx.Client, body: bytes) -> None:
    document = assert_problem(post_config(http, body), 422, "object")
    assert [error["name"] for error in document["errors"]] == ["body"]


def test_a_config_that_is_not_an_object_is_a_problem_in_the_body(http: httpx.Client) -> None:
    """The posted config is the body: its problem says so, as apply's bare list does."""
    document = assert_problem(post_config(http, b"[1, 2]"), 422, "object")
    assert document["errors"] == [
        {"name": "body", "in": "body", "detail": "the config must be a JSON object"}
    ]


@pytest.mark.parametrize(
    ("config", "name"),
    [
        pytest.param({"max_position_embeddings": 4}, "head_dim", id="nothing"),
        pytest.param({"hidden_size": 64, "max_position_embeddings": 4}, "head_dim", id="no-heads"),
        pytest.param(
            {"num_attention_heads": 4, "max_position_embeddings": 4}, "head_dim", id="no-hidden"
        ),
        pytest.param(
            {"hidden_size": 64, "num_attention_heads": 0, "max_position_embeddings": 4},
            "head_dim",
            id="zero-heads",
        ),
        pytest.param({"head_dim": "64", "max_position_embeddings": 4}, "head_dim", id="text"),
        pytest.param({"head_dim": True, "max_position_embeddings": 4}, "head_dim", id="true"),
        pytest.param({"head_dim": 64.5, "max_position_embeddings": 4}, "head_dim", id="fraction"),
        pytest.param({"head_dim": -64, "max_position_embeddings": 4}, "head_dim", id="negative"),
        pytest.param({"head_dim": 7, "max_position_embeddings": 4}, "head_dim", id="odd"),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_scaling": [1]},
            "rope_scaling",
            id="rope_scaling-list",
        ),
        pytest.param(
            {"head_dim": 8, "max_position_embeddings": 4, "rope_theta": "big"},
            "rope_theta",
            id="rope_theta-text",
        ),
        pytest.param({"head_dim": 8, "max_position_embeddings": 0}, "max_len", id="max_position_0"),
        pytest.param(
            {
                "head_dim": 8,
                "max_position_embeddings": 4,
                "rope_scaling": {"rope_type": "linear"},
            },
            "factor",
            id="linear-without-factor",
        ),
        pytest.param(
            {
                "head_dim": 8,
                "max_position_embeddings": 4,
                "rope_scaling": {
                    "rope_type": "longrope",
                    "short_factor": [1, 1, 1],
                    "long_factor": [1, 1, 1, 1],
                    "original_max_position_embeddings": 2,
                },
            },
            "short_factor",
            id="longrope-three-factors",
        ),
        pytest.param(
            {
                "head_dim": 8,
                "max_position_embeddings": 4,
                "rope_scaling": {
                    "rope_type": "longrope",
                    "short_factor": [1, 1, "x", 1],
                    "long_factor": [1, 1, 1, 1],
                    "original_max_position_embeddings": 2,
                },
            },
            "rope_scaling.short_factor",
            id="longrope-text-factor",
        ),
    ],
)
def test_a_config_without_what_a_table_needs_is_422(
    http: httpx.Client, config: dict[str, Any], name: str
) -> None:
    document = assert_problem(post_config(http, config), 422, name)
    assert name in [error["name"] for error in document["errors"]]


def test_from_config_refuses_unknown_query_parameters(http: httpx.Client) -> None:
    document = assert_problem(post_config(http, QWEN2, head_dim=64), 422, "head_dim")
    assert document["errors"][0]["in"] == "query"
    assert_problem(post_config(http, QWEN2, foo=1), 422, "foo")


def test_from_config_takes_only_json(http: httpx.Client) -> None:
    body = orjson.dumps(QWEN2)
    response = http.post(FROM_CONFIG, content=body, headers={"content-type": "text/plain"})
    assert_problem(response, 415, "Content-Type")
    assert http.post(FROM_CONFIG, content=body).status_code == 415
    for media in ("application/x-npy", "application/octet-stream", "application/x-safetensors"):
        response = http.post(FROM_CONFIG, content=body, headers={"content-type": media})
        assert_problem(response, 415, media, "application/json")


def test_from_config_unknown_fields_are_ignored(http: httpx.Client) -> None:
    """A real config.json holds far more than RoPE: the rest does not matter."""
    config = {**QWEN2, "vocab_size": 151936, "torch_dtype": "bfloat16", "sliding_window": None}
    plain = post_config(http, QWEN2, stop=2, format="npz")
    assert post_config(http, config, stop=2, format="npz").content == plain.content


# -- parameters at the edge of their domain (found by probing as a hostile client) -------


@pytest.mark.parametrize(
    ("params", "name"),
    [
        pytest.param(
            "scaling=longrope&short_factor=1,1&long_factor=2,2"
            "&original_max_position_embeddings=1&factor=2",
            "original_max_position_embeddings",
            id="longrope-log-of-1",
        ),
        pytest.param(
            "scaling=yarn&factor=4&original_max_position_embeddings=4096&mscale=1"
            "&mscale_all_dim=-7.213475204444817",
            "mscale_all_dim",
            id="yarn-mscale-ratio-over-0",
        ),
        pytest.param(
            "scaling=yarn&factor=4&original_max_position_embeddings=2147483647&beta_fast=1e-300",
            "beta_fast",
            id="yarn-infinite-correction-range",
        ),
        pytest.param("scaling=linear&factor=5e-324", "factor", id="linear-subnormal-factor"),
        pytest.param(
            "scaling=dynamic&factor=1e9&max_position_embeddings=2147483647&seq_len=2147483648",
            "scaling",
            id="dynamic-float32-cancellation",
        ),
        pytest.param(
            "scaling=longrope&short_factor=1e-40,1&long_factor=1,1"
            "&original_max_position_embeddings=64&factor=2",
            "short_factor",
            id="longrope-tiny-factor",
        ),
    ],
)
def test_scaling_parameters_at_the_edge_are_422_never_500_or_nan(
    http: httpx.Client, params: str, name: str
) -> None:
    head_dim = 4 if "longrope" in params else 64
    response = http.get(f"{ROTARY}?max_len=16&head_dim={head_dim}&{params}&format=json")
    document = assert_problem(response, 422, name)
    assert [error["name"] for error in document["errors"]] == [name]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("factor", "2"),
        ("original_max_position_embeddings", "4096"),
        ("original_max_position_embeddings", True),
        ("truncate", 0),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named(
    http: httpx.Client, field: str, value: Any
) -> None:
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    config = {
        "head_dim": 64,
        "max_position_embeddings": 16384,
        "rope_scaling": {**rope, field: value},
    }
    document = assert_problem(post_config(http, config, stop=2), 422, f"rope_scaling.{field}")
    assert document["errors"][0]["in"] == "body"


def test_a_config_past_its_byte_limit_is_413_before_it_is_parsed() -> None:
    settings = Settings(max_config_bytes=1024)
    with in_process(create_app(settings), raise_errors=False) as client:
        config = {"head_dim": 64, "max_position_embeddings": 16, "junk": [[]] * 2000}
        response = post_config(client, config)
        document = assert_problem(response, 413, "PE_MAX_CONFIG_BYTES")
        assert document["limit"] == 1024


def test_query_and_config_problems_say_where_they_are(http: httpx.Client) -> None:
    config = {"head_dim": 64, "max_position_embeddings": 16}
    document = assert_problem(post_config(http, config, stop=17), 422, "stop")
    assert document["errors"][0]["in"] == "query"
    longrope = {
        "head_dim": 8,
        "max_position_embeddings": 4,
        "rope_scaling": {
            "rope_type": "longrope",
            "short_factor": [1, 1, 1],
            "long_factor": [1, 1, 1, 1],
            "original_max_position_embeddings": 2,
        },
    }
    document = assert_problem(post_config(http, longrope), 422, "short_factor")
    assert document["errors"][0]["in"] == "body"


def test_a_config_of_many_lists_is_refused_before_it_is_parsed(http: httpx.Client) -> None:
    """1 MiB of nested empty lists under a key nothing reads: half a million lists for
    orjson to build (a third of a second of the GIL each time); a config has a few dozen."""
    body = b'{"head_dim": 64, "unused": [' + b"[" * 1000 + b"]" * 1000 + b"," + b"[]," * 200_000
    body = body.rstrip(b",") + b"]}"
    assert_problem(post_config(http, body), 400, "4,096", "lists and objects")

"""``GET /v1/audit/{family}``: each computation path's error against the exact table by
position band, where it first passes the thresholds and, for rotary tables, where a pair
first points the wrong way. The figures are checked against the service's own tables,
fetched by their ``GET`` (another path through the code), and against what a cast does."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service import handlers
from service.audit import bands, report
from service.audit import paths as audit_paths
from service.encodings import alibi, rotary
from service.runtime import QUICK_ELEMENTS, Runtime
from tests.audit.counting import counting
from tests.support import assert_problem, client_of

LLAMA = (
    "head_dim=128&base=500000&scaling=llama3&factor=8&low_freq_factor=1&high_freq_factor=4"
    "&original_max_position_embeddings=8192"
)
ROTARY_PATHS = [
    "library",
    "bf16-table",
    "fp16-table",
    "float32-positions",
    "bf16-positions",
    "fp16-positions",
    "bf16-frequencies",
    "tf32-angles",
    "device",
]


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.fixture(scope="module")
def llama(http: httpx.Client) -> dict[str, Any]:
    answer = http.get(f"/v1/audit/rotary?max_len=131072&{LLAMA}")
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {path["name"]: path for path in document["paths"]}


def pairs(http: httpx.Client, query: str) -> Any:
    """Each pair's cos and sin once, (rows, 2 * pairs) in float64, from the GET."""
    answer = http.get(f"/v1/encodings/rotary?{query}&format=npz")
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        half = archive["cos"].shape[1] // 2
        return np.concatenate([archive["cos"][:, :half], archive["sin"][:, :half]], 1)


def test_every_path_is_answered_over_every_band(llama: dict[str, Any]) -> None:
    assert [path["name"] for path in llama["paths"]] == ROTARY_PATHS
    assert llama["thresholds"] == ["1e-3", "1e-2", "1e-1"]
    assert llama["parameters"]["scaling"] == "llama3"
    for path in llama["paths"]:
        spans = path["bands"]
        assert spans[0]["start"] == 0
        assert spans[-1]["stop"] == 131072
        assert all(a["stop"] == b["start"] for a, b in itertools.pairwise(spans))
        assert all(span["samples"] >= 1 for span in spans)
        assert all(0 <= span["mean_error"] <= span["max_error"] <= 2 for span in spans)
        assert path["description"]
        assert set(path["first_over"]) == {"1e-3", "1e-2", "1e-1"}
        assert "first_misdirected" in path


def test_the_library_path_is_the_library_tables_error(
    http: httpx.Client, llama: dict[str, Any]
) -> None:
    """Below every_position_below every position is evaluated: the figures are the GET
    tables' own; the first crossings are exact below exact_below."""
    window = f"max_len=16384&{LLAMA}"
    library = pairs(http, f"{window}&rounding=library")
    exact = pairs(http, f"{window}&rounding=exact&dtype=float64")
    errors = np.abs(library.astype(np.float64) - exact).max(axis=1)
    path = by_name(llama)["library"]
    assert llama["exact_below"] >= 16384
    assert path["first_over"]["1e-3"] == int(np.flatnonzero(errors > 1e-3)[0])
    for span in path["bands"]:
        if span["stop"] <= llama["every_position_below"]:
            assert span["samples"] == span["stop"] - span["start"]
            assert span["max_error"] == pytest.approx(errors[span["start"] : span["stop"]].max())


def test_casts_lose_the_integers_they_cannot_hold(llama: dict[str, Any]) -> None:
    paths = by_name(llama)
    assert paths["bf16-positions"]["first_over"]["1e-3"] == 257  # bfloat16 holds 0..256
    assert paths["fp16-positions"]["first_over"]["1e-3"] == 2049  # float16 holds 0..2048
    # float32 positions are the library's own (transformers' position_ids.float())
    assert paths["float32-positions"]["bands"] == paths["library"]["bands"]
    assert paths["library"]["first_misdirected"] is None  # to 131072, float32 holds them
    assert paths["bf16-table"]["first_over"]["1e-3"] == 1  # cos(1) in bfloat16: 1.2e-3 off


def test_past_2_24_float32_positions_misdirect(http: httpx.Client) -> None:
    answer = http.get(f"/v1/audit/rotary?max_len={1 << 25}&{LLAMA}&paths=library")
    path = answer.json()["paths"][0]
    assert path["first_misdirected"] == (1 << 24) + 3  # rounded down by 4: pair 0 turns back


def test_paths_and_bands_as_asked(http: httpx.Client) -> None:
    answer = http.get(f"/v1/audit/rotary?max_len=4096&{LLAMA}&paths=device,library&bands=100,3000")
    document = answer.json()
    assert [path["name"] for path in document["paths"]] == ["device", "library"]
    spans = [(s["start"], s["stop"]) for s in document["paths"][0]["bands"]]
    assert spans == [(0, 100), (100, 3000), (3000, 4096)]
    for query, words in [
        ("paths=library,bf32-table", ["paths", "bf32-table"]),
        ("bands=0,5", ["bands", "from 1"]),
        ("bands=5,4096", ["bands"]),
        ("bands=a", ["bands", "positions"]),
        ("start=3", ["start"]),
        ("format=npy", ["format"]),
    ]:
        assert_problem(http.get(f"/v1/audit/rotary?max_len=4096&{LLAMA}&{query}"), 422, *words)


# an audit of half Llama 3.1's context, twice: the full run's; the fast loop checks a
# current tag (test_a_current_tag_is_answered_before_anything_is_computed) and a picture
# (test_the_format_follows_accept) on short audits
@pytest.mark.slow
def test_an_audit_is_immutable_and_drawn(http: httpx.Client) -> None:
    url = f"/v1/audit/rotary?max_len=65536&{LLAMA}"
    first = http.get(url)
    assert first.headers["cache-control"].endswith("immutable")
    assert http.get(url, headers={"if-none-match": first.headers["etag"]}).status_code == 304
    picture = http.get(url + "&format=png")
    assert picture.headers["content-type"] == "image/png"
    assert picture.content.startswith(b"\x89PNG")
    assert picture.headers["etag"] != first.headers["etag"]


def test_a_sinusoidal_preset_and_llama4s_temperature(http: httpx.Client) -> None:
    sinusoidal = http.get("/v1/audit/sinusoidal?max_len=100000&d_model=64&preset=fairseq")
    assert sinusoidal.status_code == 200, sinusoidal.text
    paths = by_name(sinusoidal.json())
    assert list(paths) == ROTARY_PATHS[:6]
    assert "first_misdirected" not in paths["library"]
    assert paths["bf16-positions"]["first_over"]["1e-3"] == 257
    temperature = http.get("/v1/audit/temperature?max_len=1000000")
    assert temperature.status_code == 200, temperature.text
    library = by_name(temperature.json())["library"]
    assert library["first_over"]["1e-3"] is None  # float32 keeps the scales to 1e-6


def test_an_audit_is_bounded_before_it_runs(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/rotary?max_len=2147483648&head_dim=16384")
    assert_problem(answer, 422, "positions audited")
    assert_problem(http.get("/v1/audit/rotary?max_len=2147483649&head_dim=8"), 422, "max_len")


def test_the_audit_of_a_config(http: httpx.Client) -> None:
    config = {
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    answer = http.post(
        "/v1/audit/rotary/from-config?paths=bf16-positions",
        content=orjson.dumps(config),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["parameters"]["max_len"] == 131072
    assert document["paths"][0]["first_over"]["1e-3"] == 257
    assert "rope_scaling.factor" in answer.headers["x-config-fields"]
    gemma = {
        "head_dim": 8,
        "max_position_embeddings": 16,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
    }
    url = "/v1/audit/rotary/from-config"
    refused = http.post(
        url, content=orjson.dumps(gemma), headers={"content-type": "application/json"}
    )
    assert_problem(refused, 422, "layer_type", "full_attention")
    one = http.post(
        url + "?layer_type=full_attention",
        content=orjson.dumps(gemma),
        headers={"content-type": "application/json"},
    )
    assert one.status_code == 200, one.text
    assert one.json()["parameters"]["base"] == 1e6


def test_alibis_bias_by_distance(http: httpx.Client) -> None:
    """BLOOM's float32 slopes times the distance; in float16 a bias past 65504 is lost."""
    answer = http.get("/v1/audit/alibi?num_heads=8&max_len=200000")
    assert answer.status_code == 200, answer.text
    paths = by_name(answer.json())
    assert list(paths) == ROTARY_PATHS[:6]
    # 8 heads: slopes 2^-1 .. 2^-8, exact in float32: the products are exact until 2^24
    assert paths["library"]["first_over"]["1e-3"] is None
    # a slope of 1/2 times 131071: 65535.5 rounds past float16's largest to infinity
    assert paths["fp16-table"]["first_over"]["1e-1"] is not None
    assert paths["fp16-table"]["bands"][-1]["max_error"] >= 65504
    assert paths["bf16-positions"]["first_over"]["1e-3"] == 257


def test_alibis_audit_reaches_its_keys(http: httpx.Client) -> None:
    """Its record's extent: distances up to the last key's, past the queries' rows; a
    family without one is audited over its rows."""
    assert audit_paths.extent(alibi.BiasKey(4, 16, 64), 16) == 64
    assert audit_paths.extent(alibi.BiasKey(4, 64, 16), 64) == 64
    assert audit_paths.extent(rotary.RotaryKey(8), 16) == 16
    answer = http.get("/v1/audit/alibi?num_heads=4&max_len=16&key_len=64&paths=library")
    assert answer.status_code == 200, answer.text
    assert answer.json()["paths"][0]["bands"][-1]["stop"] == 64


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("computed before the 304")


def test_a_current_tag_is_answered_before_anything_is_computed(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Query strings that name the same table (the replay layer keys on their text) get
    their 304 with no position planned and no array built: it held the event loop 1.5-5 s
    (``np.union1d`` of 2^21 positions) before."""
    url = "/v1/audit/sinusoidal?max_len=4096&d_model=8&paths=library&base="
    etag = http.get(url + "10000").headers["etag"]
    for name in ("plan", "audit"):
        monkeypatch.setattr(report, name, refuse)
    for name in ("plan", "spread"):
        monkeypatch.setattr(bands, name, refuse)
    for name in ("arange", "unique", "union1d", "concatenate"):
        monkeypatch.setattr(np, name, refuse)
    for base in ("10000.0", "1e4", "10000.00"):
        answer = http.get(url + base, headers={"if-none-match": etag})
        assert answer.status_code == 304, answer.text


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """What an audit request was charged (the elements its computation names) and the
    permits it took."""
    seen: list[tuple[str, int]] = []
    compute, permit = Runtime.compute, handlers.permit

    async def charged(self: Runtime, elements: int, work: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(work, "func", None) is report.audit:
            seen.append(("compute", elements))
        return await compute(self, elements, work, *args, **kwargs)

    def permitted(runtime: Runtime, large: bool) -> Any:
        seen.append(("permit", large))
        return permit(runtime, large)

    monkeypatch.setattr(Runtime, "compute", charged)
    monkeypatch.setattr(handlers, "permit", permitted)
    return seen


@pytest.mark.parametrize(
    "query",
    [
        # the dense scan of the first crossings (the attack, scaled), the refinements
        pytest.param("max_len=4096&head_dim=2&scaling=linear&factor=0.1&base=31", id="scan"),
        pytest.param("max_len=1048576&head_dim=2&scaling=linear&factor=0.1&base=37", id="refine"),
        pytest.param(f"max_len=100000&{LLAMA}&bands=7,300,5000", id="llama-bands"),
    ],
)
def test_an_audit_is_charged_all_it_evaluates(
    http: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    recorded: list[tuple[str, int]],
    query: str,
) -> None:
    """Every path, the exact entries, the dense scans and the refinements are counted in
    the charge that chooses the lane (the scans cost 9.2 CPU s where 2.9 s were charged)."""
    monkeypatch.setattr(report, "SCAN", 1 << 8)  # the head and the scan, small
    monkeypatch.setattr(report, "SCAN_FIRST", 1 << 13)
    evaluated = counting(monkeypatch)
    answer = http.get(f"/v1/audit/rotary?{query}")
    assert answer.status_code == 200, answer.text
    charged = [elements for what, elements in recorded if what == "compute"]
    assert len(charged) == 1
    assert 0 < evaluated[0] <= charged[0]


def test_an_audit_past_the_quick_lanes_budget_takes_the_cpu_lane_and_a_turn(
    http: httpx.Client, recorded: list[tuple[str, int]]
) -> None:
    """2,048 positions of 128 entries were charged 2^18 numbers and took the quick lane (0.3
    CPU s each: one-row tables waited behind them); a two-position audit still takes it."""
    answer = http.get("/v1/audit/rotary?max_len=2048&head_dim=128&base=10001")
    assert answer.status_code == 200, answer.text
    assert ("permit", True) in recorded
    assert [what for what, _ in recorded if what == "compute"] == ["compute"]
    assert recorded[-1][1] > QUICK_ELEMENTS
    recorded.clear()
    small = http.get("/v1/audit/rotary?max_len=2&head_dim=2&paths=library&base=10001")
    assert small.status_code == 200, small.text
    assert recorded == [("permit", False), ("compute", recorded[-1][1])]
    assert recorded[-1][1] <= QUICK_ELEMENTS


def test_the_format_follows_accept(http: httpx.Client) -> None:
    url = "/v1/audit/rotary?max_len=64&head_dim=8"
    picture = http.get(url, headers={"accept": "image/png"})
    assert picture.headers["content-type"] == "image/png"
    assert picture.headers["vary"] == "Accept"
    assert picture.content.startswith(b"\x89PNG")
    document = http.get(url, headers={"accept": "application/json, image/png;q=0.5"})
    assert document.headers["content-type"] == "application/json"
    assert document.headers["vary"] == "Accept"
    assert document.headers["etag"] != picture.headers["etag"]
    assert http.get(url, headers={"accept": "*/*"}).headers["content-type"] == "application/json"
    refused = http.get(url, headers={"accept": "application/x-npy"})
    assert_problem(refused, 406, "image/png", "application/json")
    named = http.get(url + "&format=json", headers={"accept": "image/png"})
    assert named.headers["content-type"] == "application/json"
    assert "vary" not in named.headers
    posted = http.post(
        "/v1/audit/rotary/from-config?max_len=64",
        content=orjson.dumps({"head_dim": 8, "max_position_embeddings": 64}),
        headers={"content-type": "application/json", "accept": "application/x-npy"},
    )
    assert_problem(posted, 406, "image/png")


def test_hugging_faces_names_are_taken(http: httpx.Client) -> None:
    """``rope_theta`` and ``rope_type``, as the table's GET and compare take them."""
    named = http.get(f"/v1/audit/rotary?max_len=64&{LLAMA}&paths=library")
    renamed_query = LLAMA.replace("base=", "rope_theta=").replace("scaling=", "rope_type=")
    renamed = http.get(f"/v1/audit/rotary?max_len=64&{renamed_query}&paths=library")
    assert renamed.status_code == 200, renamed.text
    assert renamed.json() == named.json()
    assert renamed.headers["etag"] == named.headers["etag"]
    both = http.get(f"/v1/audit/rotary?max_len=64&{LLAMA}&rope_theta=10000")
    assert_problem(both, 422, "rope_theta", "base")


def longrope(pairs: int) -> dict[str, Any]:
    """A longrope config whose factors fill many lines of a picture's title."""
    factors = {
        "long_factor": [1 + k / 81 for k in range(pairs)],
        "short_factor": [1 + k / 997 for k in range(pairs)],
    }
    return {
        "head_dim": 2 * pairs,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "longrope", **factors},
    }


def test_a_long_title_fits_the_picture(http: httpx.Client) -> None:
    """A title taller than the picture (a longrope model's factors) was a 500."""
    config = longrope(128)
    scaling = config["rope_scaling"]
    query = (
        f"max_len=64&head_dim={config['head_dim']}&scaling=longrope&paths=library"
        "&max_position_embeddings=131072&original_max_position_embeddings=4096"
        + "".join(
            f"&{name}={','.join(map(str, scaling[name]))}"
            for name in ("long_factor", "short_factor")
        )
    )
    picture = http.get(f"/v1/audit/rotary?{query}&format=png")
    assert picture.status_code == 200, picture.text
    assert picture.content.startswith(b"\x89PNG")
    posted = http.post(
        "/v1/audit/rotary/from-config?format=png&paths=library&max_len=64",
        content=orjson.dumps(config),
        headers={"content-type": "application/json"},
    )
    assert posted.status_code == 200, posted.text
    assert posted.content.startswith(b"\x89PNG")

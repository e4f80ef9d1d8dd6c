"""The family seam: each stub family in ``tests/seam/`` (one per shape: rows cached by
pages, named arrays per row, a block computed per request, positions of several axes and
not integers, a key from a posted document, a table the precision audit serves) is one new
file, found there (the app below is built with every family the folder declares), and gets
its routes, formats, validators, 304s, replay, limits, the cache listing, preload, the audit
and compare, and the client with no other change."""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest
from numpy.typing import NDArray
from posenc_client import Client

from service.app import create_app
from service.codecs.types import MEDIA_TYPES
from service.encodings import registry
from service.encodings.registry import Family
from service.schemas.alibi import SlopesQuery
from service.schemas.sinusoidal import TableQuery
from service.settings import Settings
from service.web.responses import table_etag
from tests import seam
from tests.seam import distances, grid, levels, phases, ramp, waves
from tests.support import assert_problem, cache_stats, in_process, load, npy_bytes

# the registration: a new file in tests/seam/ that declares its TABLE
STUBS = seam.stubs()
RAMP = "/v1/encodings/ramp"


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    settings = Settings(max_elements=1 << 16, preload="ramp?max_len=1000&width=3")
    with seam.served(), in_process(create_app(settings, families=STUBS)) as client:
        yield client


def ramp_rows(start: int, stop: int, width: int) -> NDArray[np.float64]:
    return np.arange(start, stop)[:, None] + np.arange(width, dtype=np.float64)


def test_every_stub_in_the_folder_is_served() -> None:
    """The list is derived from the folder: each shape's stub is found, none twice."""
    names = [stub.family.name for stub in STUBS]
    assert {"distances", "grid", "levels", "phases", "ramp", "waves"} <= set(names)
    assert len(set(names)) == len(names)
    for stub in (ramp.TABLE, phases.TABLE, distances.TABLE, grid.TABLE, levels.TABLE, waves.TABLE):
        assert any(each is stub for each in STUBS)


def test_the_stubs_touch_nothing_of_the_service() -> None:
    from service.routes import FAMILIES

    source = "".join(path.read_text() for path in Path("service").rglob("*.py"))
    # a real family's parameter may be spelled as a stub is named (rope-nd's grid)
    parameters = {name for declared in FAMILIES for name in declared.query.model_fields}
    for stub in STUBS:
        name = stub.family.name
        assert f'"{name}"' not in source or name in parameters
        assert f'Family("{name}"' not in source
        assert stub.resource == f"/v1/encodings/{stub.family.name}"


# -- rows cached by pages ---------------------------------------------------------------


def test_a_stub_family_is_served_in_every_format(http: httpx.Client) -> None:
    for fmt in ("json", "npy", "raw", "safetensors"):
        response = http.get(f"{RAMP}?max_len=3000&width=5&start=2990&format={fmt}")
        assert response.status_code == 200, response.text
        if fmt != "safetensors":
            assert np.array_equal(load(response), ramp_rows(2990, 3000, 5))
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    head = http.head(f"{RAMP}?max_len=3000&width=5&start=2990&format=npy")
    assert head.status_code == 200
    assert head.content == b""


def test_it_is_paged_cached_listed_and_replayed(http: httpx.Client) -> None:
    url = f"{RAMP}?max_len=100000&width=8&start=99990&format=npy"
    first = http.get(url)
    stats = cache_stats(http)
    (table,) = [t for t in stats["tables"] if t["key"].get("width") == 8]
    assert table["family"] == "ramp"
    assert table["key"] == {"width": 8, "step": 1.0, "dtype": "float32"}
    assert table["pages"] == 1  # the page holding rows 99,990 .. 99,999, not the rows before
    again = http.get(url)
    assert again.content == first.content
    assert cache_stats(http)["response_hits"] == stats["response_hits"] + 1
    tagged = http.get(url, headers={"if-none-match": first.headers["etag"]})
    assert tagged.status_code == 304


def test_its_limits_name_its_width(http: httpx.Client) -> None:
    assert_problem(http.get(f"{RAMP}?max_len=100000&width=8"), 422, "rows × width")
    assert_problem(http.get(f"{RAMP}?max_len=4294967296&width=8&stop=3"), 422, "PE_MAX_POSITION")


def test_it_is_preloaded_by_its_query(http: httpx.Client) -> None:
    for _ in range(200):
        if http.get("/readyz").status_code == 200:
            break
        time.sleep(0.05)
    tables = cache_stats(http)["tables"]
    preloaded = [t for t in tables if t["key"] == {"width": 3, "step": 1.0, "dtype": "float32"}]
    assert preloaded
    assert preloaded[0]["pages"] >= 1


def test_a_preload_its_family_refuses_is_one_line() -> None:
    with (
        seam.served(),
        pytest.raises(ValueError, match=r"PE_PRELOAD: 'ramp\?max_len=0&width=3': .*max_len"),
    ):
        create_app(Settings(preload="ramp?max_len=0&width=3"), families=STUBS)
    with seam.served(), pytest.raises(ValueError, match="no family 'nothing'"):
        create_app(Settings(preload="nothing?max_len=3"), families=STUBS)


def test_the_client_asks_for_it_by_its_parameters(http: httpx.Client) -> None:
    table = Client(http=http).encoding("ramp", 50, start=45, width=4, step=0.5)
    assert np.array_equal(table, np.arange(45, 50)[:, None] + 0.5 * np.arange(4))


def test_its_routes_are_in_the_openapi_document(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert paths[RAMP]["get"]["operationId"] == "getRamp"
    assert paths["/v1/encodings/phases/positions"]["post"]["operationId"] == "getPhasesAt"
    assert (
        paths["/v1/encodings/levels/from-config"]["post"]["operationId"] == "getLevelsFromDocument"
    )


# -- several named arrays per row --------------------------------------------------------


def phase_rows(positions: NDArray[np.int64], pairs: int) -> NDArray[np.float32]:
    return phases.take(phases.PhaseKey(pairs), positions)


def test_named_arrays_are_members_or_stacked(http: httpx.Client) -> None:
    url = "/v1/encodings/phases?max_len=12&pairs=3&start=4"
    expected = phase_rows(np.arange(4, 12), 3)
    document = http.get(url + "&format=json").json()
    assert np.array_equal(np.array(document["cos"], np.float32), expected[:, :3])
    assert np.array_equal(np.array(document["sin"], np.float32), expected[:, 3:])
    with np.load(io.BytesIO(http.get(url + "&format=npz").content)) as archive:
        assert sorted(archive.files) == ["cos", "sin"]
        assert np.array_equal(archive["sin"], expected[:, 3:])
    stacked = load(http.get(url + "&format=npy"))
    assert stacked.shape == (2, 8, 3)
    assert np.array_equal(stacked[0], expected[:, :3])
    assert Client(http=http).encoding("phases", 12, pairs=3, start=4).shape == (2, 8, 3)


def test_rows_at_posted_positions_keep_the_names(http: httpx.Client) -> None:
    ids = [[3, 1, 40000], [0, 7, 2]]
    answer = http.post(
        "/v1/encodings/phases/positions?max_len=1&pairs=2&format=npz",
        content=orjson.dumps({"position_ids": ids}),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    expected = phase_rows(np.array(ids).ravel(), 2).reshape(2, 3, 4)
    with np.load(io.BytesIO(answer.content)) as archive:
        assert np.array_equal(archive["cos"], expected[..., :2])
        assert np.array_equal(archive["sin"], expected[..., 2:])


def test_posted_positions_are_checked(http: httpx.Client) -> None:
    url = "/v1/encodings/phases/positions?max_len=1&pairs=2"
    json = {"content-type": "application/json"}
    assert_problem(
        http.post(url, content=b'{"position_ids": [-1]}', headers=json), 422, "non-negative"
    )
    assert_problem(
        http.post(url, content=b'{"position_ids": [1.5]}', headers=json), 422, "integers"
    )
    assert_problem(http.post(url, content=b'{"ids": [1]}', headers=json), 422, "ids")
    assert_problem(
        http.post(url, content=b'{"position_ids": [4294967296]}', headers=json),
        422,
        "PE_MAX_POSITION",
    )
    assert_problem(
        http.post(url, content=b'{"position_ids": [[[1]]]}', headers=json), 422, "(L) or (B, L)"
    )
    floats = npy_bytes(np.array([0.5]))
    assert_problem(
        http.post(url, content=floats, headers={"content-type": MEDIA_TYPES["npy"]}),
        422,
        "integers",
    )
    assert http.post(url, content=b"x", headers={"content-type": "text/plain"}).status_code == 415


# -- computed per request ----------------------------------------------------------------


def test_a_block_computed_per_request_has_its_own_shape(http: httpx.Client) -> None:
    url = "/v1/encodings/distances?max_len=6&key_len=4&start=2&scale=0.5&format=npy"
    first = http.get(url)
    expected = np.abs(np.arange(2, 6)[:, None] - np.arange(4)) * 0.5
    assert np.array_equal(load(first), expected.astype(np.float32))
    raw = http.get(url.replace("npy", "raw"))
    assert raw.headers["x-shape"] == "4,4"
    assert all(t["family"] != "distances" for t in cache_stats(http)["tables"])
    hits = cache_stats(http)["response_hits"]
    assert http.get(url).content == first.content
    assert cache_stats(http)["response_hits"] == hits + 1
    assert http.get(url, headers={"if-none-match": first.headers["etag"]}).status_code == 304


def test_its_limits_and_bound_hold(http: httpx.Client) -> None:
    assert_problem(http.get("/v1/encodings/distances?max_len=1000&key_len=1000"), 422, "key_len")
    too_large = http.get("/v1/encodings/distances?max_len=3&key_len=3&scale=1e39&format=npy")
    assert_problem(too_large, 422, "scale")


# -- positions of several axes, not integers -----------------------------------------------


def test_a_grid_is_served_by_rows_and_at_coordinates(http: httpx.Client) -> None:
    key = grid.GridKey(2, 5)
    table = load(http.get("/v1/encodings/grid?height=3&columns=5&pairs=2&format=npy"))
    assert table.shape == (15, 8)
    assert np.array_equal(Client(http=http).encoding("grid", height=3, columns=5, pairs=2), table)
    assert np.array_equal(table[7], grid.at(key, np.array([[1.0], [2.0]]))[0])
    coordinates = np.array([[[0.25, 1.5, 2.0]], [[3.75, 0.0, 1e6]]])  # (2, B=1, L=3)
    answer = http.post(
        "/v1/encodings/grid/positions?height=3&columns=5&pairs=2&format=npy",
        content=npy_bytes(coordinates),
        headers={"content-type": MEDIA_TYPES["npy"]},
    )
    assert answer.status_code == 200, answer.text
    rows = load(answer)
    assert rows.shape == (1, 3, 8)
    assert np.array_equal(rows[0], grid.at(key, coordinates.reshape(2, 3)))


def test_coordinates_are_checked(http: httpx.Client) -> None:
    url = "/v1/encodings/grid/positions?height=3&columns=5&pairs=2"
    npy = {"content-type": MEDIA_TYPES["npy"]}
    one_axis = http.post(url, content=npy_bytes(np.array([1.0, 2.0])), headers=npy)
    assert_problem(one_axis, 422, "position_ids", "(2, L) or (2, B, L)")
    nan = http.post(url, content=npy_bytes(np.array([[np.nan], [1.0]])), headers=npy)
    assert_problem(nan, 422, "finite")
    far = http.post(url, content=npy_bytes(np.array([[1e12], [1.0]])), headers=npy)
    assert_problem(far, 422, "PE_MAX_POSITION")


# -- a key from a posted document -----------------------------------------------------------


def test_a_key_from_a_posted_document(http: httpx.Client) -> None:
    document = orjson.dumps({"hidden": 3, "factor": 0.5, "positions": 10, "other": "kept out"})
    json = {"content-type": "application/json"}
    answer = http.post(
        "/v1/encodings/levels/from-config?start=8&format=npy", content=document, headers=json
    )
    assert answer.status_code == 200, answer.text
    assert np.array_equal(load(answer), np.repeat([[4.0], [4.5]], 3, axis=1))
    location = answer.headers["content-location"]
    again = http.get(location)
    assert again.content == answer.content
    assert again.headers["etag"] == answer.headers["etag"]
    shorter = http.post(
        "/v1/encodings/levels/from-config?max_len=2&format=npy", content=document, headers=json
    )
    assert load(shorter).shape == (2, 3)


def test_a_document_is_refused_where_its_values_came_from(http: httpx.Client) -> None:
    json = {"content-type": "application/json"}
    url = "/v1/encodings/levels/from-config"
    missing = http.post(url, content=b'{"hidden": 3}', headers=json)
    assert_problem(missing, 422, "max_len", "no positions")
    wrong = http.post(url, content=b'{"hidden": 0, "positions": 4}', headers=json)
    problem = assert_problem(wrong, 422, "width")
    assert problem["errors"][0]["in"] == "body"  # the document said it, not the query
    overridden = http.post(url + "?max_len=0", content=b'{"hidden": 3}', headers=json)
    assert assert_problem(overridden, 422, "max_len")["errors"][0]["in"] == "query"
    assert http.post(url, content=b"[", headers=json).status_code == 400
    assert http.post(url, content=b"{}", headers={"content-type": "text/plain"}).status_code == 415


# -- a table the precision audit serves ------------------------------------------------------


def test_a_stub_with_an_audit_record_is_audited(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/waves?max_len=3000&width=4")
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["family"] == "waves"
    assert document["parameters"] == {"max_len": 3000, "width": 4}
    paths = {path["name"]: path for path in document["paths"]}
    # the shared paths its record keeps, in their order, then its own
    assert list(paths) == ["library", "bf16-table", "float32-positions", "even-positions"]
    assert "first_misdirected" not in paths["library"]  # no turned pairs
    # its own path: sin(p) against sin(p - 1) at odd p, at least 0.1 apart at p = 1
    assert paths["even-positions"]["first_over"]["1e-1"] == 1
    # float32 positions are integers to 2^24: the library's float32 arithmetic alone
    assert paths["float32-positions"]["bands"] == paths["library"]["bands"]
    assert 0 < paths["library"]["bands"][-1]["max_error"] < 1e-3
    assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
    again = http.get(
        "/v1/audit/waves?max_len=3000&width=4", headers={"if-none-match": answer.headers["etag"]}
    )
    assert again.status_code == 304
    assert_problem(http.get("/v1/audit/waves?max_len=30&width=4&paths=device"), 422, "paths")


def test_a_stub_with_an_audit_record_is_compared(http: httpx.Client) -> None:
    body = {
        "a": {"family": "waves", "parameters": {"width": 4}},
        "b": {"family": "waves", "parameters": {"width": 4, "rounding": "exact"}},
        "stop": 5000,
    }
    answer = http.post("/v1/compare", json=body)
    assert answer.status_code == 200, answer.text
    compared = answer.json()
    assert 0 < max(band["max_difference"] for band in compared["bands"]) < 1e-3
    assert "max_angle_drift" not in compared["bands"][0]
    # a family without the record is not compared: ramp's tables are not audited
    ramp_body = {**body, "a": {"family": "ramp", "parameters": {"width": 4}}}
    problem = assert_problem(http.post("/v1/compare", json=ramp_body), 422, "a.family")
    assert "waves" in problem["errors"][0]["detail"]


def test_an_audit_declared_without_its_record_is_refused_at_create_app() -> None:
    unrecorded = dataclasses.replace(ramp.TABLE, audit=True)
    with pytest.raises(TypeError, match=r"family ramp declares audit=True .* no audit record"):
        create_app(Settings(), families=[unrecorded])


def test_the_real_families_are_declared_on_the_same_seam() -> None:
    from service.routes import FAMILIES

    names = [declared.family.name for declared in FAMILIES]
    assert names == [
        "sinusoidal",
        "rotary",
        "alibi-slopes",
        "alibi",
        "temperature",
        "timestep",
        "sincos-2d",
        "sincos-3d",
        "rope-nd",
        "vision-rotary",
    ]
    assert FAMILIES[1].family.arrays == ("cos", "sin")
    assert all(d.family.block is not None for d in FAMILIES[2:4])
    assert FAMILIES[4].family.block is None  # Llama 4's scales: a cached table of one column
    positions = FAMILIES[5].positions  # diffusion timesteps: a cached table, real timesteps
    assert positions is not None
    assert not positions.integers


def test_ids_are_bounded_before_they_are_converted(http: httpx.Client) -> None:
    url = "/v1/encodings/phases/positions?max_len=1&pairs=4096"
    npy = {"content-type": MEDIA_TYPES["npy"]}
    many = npy_bytes(np.zeros(1 << 20, dtype=np.int8))  # 1 MiB of ids, 8 MiB as int64
    assert_problem(http.post(url, content=many, headers=npy), 422, "position ids × width")
    past = npy_bytes(np.array([2**63 + 5], dtype=np.uint64))
    assert_problem(http.post(url, content=past, headers=npy), 422, "past int64")


def test_a_declaration_that_cannot_be_served_is_refused_when_routed() -> None:
    from service.web.declared import Positions
    from service.web.families import router

    floats: Positions[phases.PhaseKey] = Positions("x", "x", integers=False)
    with pytest.raises(TypeError, match="need at"):
        router(dataclasses.replace(phases.TABLE, positions=floats))
    rows: Positions[distances.DistanceKey] = Positions("x", "x")
    with pytest.raises(TypeError, match="need at"):
        router(dataclasses.replace(distances.TABLE, positions=rows))
    with pytest.raises(TypeError, match="fill and take, or block alone"):
        Family("both", ramp.RampKey, ramp.fill, block=distances.block)  # type: ignore[arg-type]


def test_a_block_of_another_size_than_its_rows_is_a_bug() -> None:
    wrong = dataclasses.replace(distances.TABLE.family, block=lambda key, start, stop: np.zeros(3))
    with registry.registered(wrong), pytest.raises(TypeError, match="holds 3"):
        registry.block(distances.DistanceKey(4), 0, 2)


def test_the_tags_of_the_families_before_the_seam_are_kept(http: httpx.Client) -> None:
    query = TableQuery(max_len=8, d_model=8)
    answer = http.get("/v1/encodings/sinusoidal?max_len=8&d_model=8&format=npy")
    assert answer.headers["etag"] == table_etag(query.describe(), "npy", False)
    alibi = http.get("/v1/biases/alibi/slopes?num_heads=4&format=npy")
    fields = {**SlopesQuery(num_heads=4).describe(), "resource": "/v1/biases/alibi/slopes"}
    assert alibi.headers["etag"] == table_etag(fields, "npy", False)


def test_a_stub_s_audit_query_names_its_paths(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()["paths"]["/v1/audit/waves"]["get"]["parameters"]
    described = next(p["description"] for p in spec if p["name"] == "paths")
    assert described.endswith(": library, bf16-table, float32-positions, even-positions.")


def test_a_stub_s_presets_are_listed_with_the_others(http: httpx.Client) -> None:
    listed = http.get("/v1/presets").json()["families"]["waves"]
    assert [preset["name"] for preset in listed] == ["halving"]
    assert listed[0]["follows"][0]["version"] == "1.0"
    assert listed[0]["fixes"] == {"width": 4}

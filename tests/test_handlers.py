"""The transport-free pipelines: what a table request or an apply computes (only the rows
it needs, through the cache or on their own), its limits, its content coding."""

from __future__ import annotations

import gzip
import io

import anyio
import httpx
import numpy as np
import orjson
import pytest

from service import codecs, handlers
from service import runtime as runtime_module
from service.app import create_app
from service.encodings.sinusoidal import SinusoidalKey
from service.errors import LimitExceeded
from service.limits import Limits
from service.metrics import Telemetry
from service.runtime import Runtime
from service.settings import Settings
from service.web.responses import table_etag
from tests.support import APPLY, TABLE, cache_stats, in_process, npy_bytes, npz_bytes, table_url

NPY = {"content-type": "application/x-npy"}
NPZ = {"content-type": "application/x-npz"}


def test_a_block_is_large_by_the_rows_it_computes() -> None:
    wide = SinusoidalKey(4096, dtype="float64")  # 32 KiB a row
    assert handlers.Block(wide, 0, 257, 0, 1, 257).large  # over 8 MiB of rows, one column returned
    assert not handlers.Block(wide, 0, 256, 0, 4096, 256).large


@pytest.mark.parametrize(
    ("block", "fmt", "setting"),
    [
        pytest.param(
            handlers.Block(SinusoidalKey(10), 0, 11, 0, 10, 11), "npy", "PE_MAX_ELEMENTS", id="rows"
        ),
        pytest.param(
            handlers.Block(SinusoidalKey(2), 0, 1, 0, 2, 100),
            "npy",
            "PE_MAX_POSITION",
            id="position",
        ),
        pytest.param(
            handlers.Block(SinusoidalKey(10), 0, 10, 0, 10, 10),
            "json",
            "PE_MAX_JSON_ELEMENTS",
            id="json",
        ),
    ],
)
def test_table_limits(block: handlers.Block, fmt: codecs.types.Format, setting: str) -> None:
    limits = Limits.of(Settings(max_elements=100, max_position=98, max_json_elements=99))
    with pytest.raises(LimitExceeded) as caught:
        handlers.check_table(limits, block, fmt, "d_model")
    assert caught.value.extensions["setting"] == setting


def test_the_etag_follows_the_fields_format_and_coding() -> None:
    fields = {"max_len": 4, "d_model": 4}
    tags = {
        table_etag(fields, "json", False),
        table_etag(fields, "json", True),
        table_etag(fields, "npy", False),
        table_etag({**fields, "max_len": 5}, "json", False),
    }
    assert len(tags) == 4
    assert table_etag(dict(reversed(fields.items())), "json", False) in tags


def test_a_far_slice_keeps_one_page(own_api: httpx.Client) -> None:
    """Ten float64 rows at 999,990 of a d_model=64 table: one 512-row page, not a million rows."""
    api = own_api
    before = cache_stats(api)
    url = table_url(
        max_len=1_000_000, d_model=64, base=64.5, start=999_990, dtype="float64", format="npy"
    )
    assert api.get(url).status_code == 200
    after = cache_stats(api)
    assert after["misses"] == before["misses"] + 1
    table = next(t for t in after["tables"] if t["key"]["base"] == 64.5)
    assert (table["pages"], table["page_rows"], table["bytes"]) == (1, 512, 512 * 64 * 8)


@pytest.mark.parametrize(
    ("ids", "pages", "base"),
    [
        pytest.param([8_000_000], 1, 48.1, id="one-far-id-its-page"),
        pytest.param([0, 1_000_000, 2_000_000], 0, 48.2, id="scattered-computed-alone"),
        pytest.param([0, 3, 2_000_000_000], 0, 48.3, id="near-and-far-computed-alone"),
        pytest.param([5, 3, 3, 9, 0, 1], 1, 48.4, id="dense-through-the-cache"),
        pytest.param([8000, 8001, 8003, 8002], 1, 48.5, id="dense-far-through-the-cache"),
    ],
)
def test_scattered_positions_cost_only_their_rows(
    own_api: httpx.Client, ids: list[int], pages: int, base: float
) -> None:
    """Positions whose span is dense read the pages they touch; sparse ones are computed
    on their own, neither through the rows between them nor kept. (Each case has a table
    of its own on the shared server.)"""
    api = own_api
    x = np.ones((len(ids), 48), np.float32)
    before = cache_stats(api)
    body = npz_bytes(embeddings=x, position_ids=np.array(ids))
    response = api.post(f"{APPLY}?base={base}", content=body, headers=NPZ)
    assert response.status_code == 200, response.text
    after = cache_stats(api)
    assert after["misses"] == before["misses"] + pages
    held = [t for t in after["tables"] if t["key"]["base"] == base]
    assert sum(t["pages"] for t in held) == pages


def test_dense_ids_over_the_element_limit_are_computed_on_their_own() -> None:
    """Ids whose span is dense but too long to compute are taken one by one instead: the
    request is refused only if its distinct positions themselves are over the limit."""
    x = np.ones((4000, 8), np.float32)
    with in_process(create_app(Settings(max_elements=100_000))) as http:
        for stride, status in [(4, 200), (5, 200), (1, 200)]:
            body = npz_bytes(embeddings=x, position_ids=np.arange(4000) * stride)
            assert http.post(APPLY, content=body, headers=NPZ).status_code == status
        wide = npz_bytes(embeddings=np.ones((4000, 30), np.float32), position_ids=np.arange(4000))
        document = http.post(APPLY, content=wide, headers=NPZ).json()
    assert (document["status"], document["setting"]) == (422, "PE_MAX_ELEMENTS")


def test_an_offset_apply_reads_the_pages_of_its_rows(own_api: httpx.Client) -> None:
    api = own_api
    before = cache_stats(api)
    response = api.post(
        APPLY + "?offset=20000&base=40.5",
        content=npy_bytes(np.ones((2, 4096), np.float32)),
        headers=NPY,
    )
    assert response.status_code == 200
    after = cache_stats(api)
    assert after["misses"] == before["misses"] + 1
    table = next(t for t in after["tables"] if t["key"]["base"] == 40.5)
    assert table["bytes"] <= 256 << 10


@pytest.mark.parametrize("accept_encoding", ["gzip", "gzip, deflate, br", "*"])
def test_json_is_gzipped_when_the_client_accepts_it(
    api: httpx.Client, accept_encoding: str
) -> None:
    url = TABLE + "?max_len=64&d_model=32&format=json"
    plain = api.get(url, headers={"accept-encoding": "identity"})
    packed = api.get(url, headers={"accept-encoding": accept_encoding})
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.num_bytes_downloaded < plain.num_bytes_downloaded / 2
    assert packed.content == plain.content  # the client inflates it
    assert packed.headers["etag"] != plain.headers["etag"]  # another representation
    assert "Accept-Encoding" in packed.headers["vary"]
    again = api.get(
        url, headers={"accept-encoding": "gzip", "if-none-match": packed.headers["etag"]}
    )
    assert again.status_code == 304


@pytest.mark.parametrize("fmt", ["npy", "raw"])
def test_binary_is_never_gzipped(api: httpx.Client, fmt: str) -> None:
    response = api.get(
        f"{TABLE}?max_len=64&d_model=32&format={fmt}", headers={"accept-encoding": "gzip"}
    )
    assert "content-encoding" not in response.headers


def test_apply_json_is_gzipped_too(api: httpx.Client) -> None:
    body = orjson.dumps({"embeddings": np.zeros((16, 16)).tolist()})
    headers = {"content-type": "application/json", "accept-encoding": "gzip"}
    response = api.post(TABLE + "/apply", content=body, headers=headers)
    assert response.headers["content-encoding"] == "gzip"
    assert response.json()["shape"] == [16, 16]


def test_small_json_is_not_worth_gzipping(api: httpx.Client) -> None:
    response = api.get(TABLE + "?max_len=2&d_model=2", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in response.headers


def test_gzipped_bytes_are_a_real_gzip_stream() -> None:
    headers, body = codecs.gzip(({"content-type": "application/json"}, b"[1.0]" * 100))
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == b"[1.0]" * 100


def test_preparing_a_new_key_takes_the_cpu_lane_not_the_quick_one() -> None:
    """A one-row table of a new rounding=exact yarn key at the widest head computes its
    frequencies first (8,192 pairs' factors; 30 ms of decimal arithmetic before they were
    vectorized): CPU work that does not take the lane small requests share. With every
    quick-lane thread busy, it is still answered; once its key is ready, it is a small
    request again."""
    from service.encodings import registry as families
    from service.encodings import rotary, scalings

    params = scalings.resolve(
        "yarn", {"factor": 4.0, "original_max_position_embeddings": 4096}, 16384, 1
    )
    key = rotary.RotaryKey(16384, base=12345.0, scaling="yarn", params=params, rounding="exact")
    assert families.preparation(key) > runtime_module.QUICK_ELEMENTS

    async def main() -> None:
        runtime = Runtime(Settings(), Telemetry(lambda: None))
        holders = [object() for _ in range(int(runtime.quick.total_tokens))]
        for holder in holders:
            await runtime.quick.acquire_on_behalf_of(holder)
        with anyio.fail_after(30):  # it waited for the quick lane for ever
            parts = await handlers.rows(runtime, key, 0, 1)
        assert parts[0].shape == (1, key.width)
        for holder in holders:
            runtime.quick.release_on_behalf_of(holder)

    anyio.run(main)
    assert families.preparation(key) == 0


def test_a_permit_is_held_for_its_block_or_handed_to_the_answer() -> None:
    """``async with permit(runtime, large)``: a large answer takes one of the few permits
    (a small one none) and gives it back when the block ends, even on failure; one
    handed over stays taken until the answer gives it back."""

    async def main() -> None:
        runtime = Runtime(Settings(), Telemetry(lambda: None))
        permits = runtime.large_answers
        total = permits.value
        async with handlers.permit(runtime, False) as small:
            assert permits.value == total
            assert small.hand_over() is None
        async with handlers.permit(runtime, True):
            assert permits.value == total - 1
        assert permits.value == total
        with pytest.raises(RuntimeError):
            async with handlers.permit(runtime, True):
                raise RuntimeError
        assert permits.value == total
        async with handlers.permit(runtime, True) as held:
            release = held.hand_over()
        assert permits.value == total - 1
        assert release is not None
        release()
        assert permits.value == total

    anyio.run(main)


def test_a_layered_read_is_one_answer_of_its_tables() -> None:
    """The tables of a document that makes one per kind of layer, driven without HTTP:
    JSON keyed by kind (each table's fields and arrays), or members ``NAME/cos``."""
    from service.encodings.rotary import RotaryKey

    async def main() -> None:
        runtime = Runtime(Settings(), Telemetry(lambda: None))
        local, full = RotaryKey(4, base=10000.0), RotaryKey(4, base=1000000.0)
        blocks = {
            "sliding_attention": handlers.Block(local, 1, 3, 0, 8, 3),
            "full_attention": handlers.Block(full, 0, 2, 0, 8, 2),
        }
        described = {name: {"name": name} for name in blocks}
        layers = ["sliding_attention", "full_attention"]
        headers, body = await handlers.tables(
            runtime, blocks, described, layers, ["rope_theta"], "json", False
        )
        assert headers == {"content-type": "application/json"}
        document = orjson.loads(body)
        assert document["layer_types"] == layers
        assert document["config_fields"] == ["rope_theta"]
        table = document["tables"]["sliding_attention"]
        rows = np.concatenate(runtime.cache.rows(local, 0, 3))[1:3]
        assert table["name"] == "sliding_attention"
        assert np.allclose(table["cos"], rows[:, :4])
        assert np.allclose(table["sin"], rows[:, 4:])
        _, archive = await handlers.tables(
            runtime, blocks, described, layers, ["rope_theta"], "npz", False
        )
        with np.load(io.BytesIO(archive)) as members:
            assert sorted(members.files) == [
                "full_attention/cos",
                "full_attention/sin",
                "sliding_attention/cos",
                "sliding_attention/sin",
            ]
            assert np.array_equal(
                members["full_attention/sin"], runtime.cache.rows(full, 0, 2)[0][:, 4:]
            )
        zipped, squeezed = await handlers.tables(
            runtime, blocks, described, layers, [], "json", True
        )
        assert zipped["content-encoding"] == "gzip"
        assert orjson.loads(gzip.decompress(squeezed))["tables"].keys() == blocks.keys()

    anyio.run(main)

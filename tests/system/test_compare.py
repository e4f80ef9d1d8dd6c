"""What a compare holds while it is answered (docs/settings.md, "Memory"), against a fresh
server process: a 170-byte request for two tables 65,536 wide over 512 positions held
+2.3 GiB as a PNG (the whole difference, then its logarithm and colours, drawn) and
+1.0 GiB as JSON (both tables, twice); compares at once take the large answers' turns."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Final

import httpx
import orjson
import pytest

from service.cores import available
from tests.support import TABLE, rss_mib, serving
from tests.system.test_memory import SLACK, peak_mib

pytestmark = pytest.mark.slow

MiB: Final = 1 << 20
JSON: Final = {"content-type": "application/json"}
# a chunk of 2^20 entries of each table: their rows, float64 entries and difference
CHUNK_MIB: Final = 64
# the picture's pixels (900 x 640, 64 bytes each) and matplotlib itself
PICTURE_MIB: Final = 64 * 900 * 640 / MiB + 42


def comparison(width: int, stop: int) -> bytes:
    a = {"family": "sinusoidal", "parameters": {"d_model": width}}
    b = {"family": "sinusoidal", "parameters": {"d_model": width, "base": 20000}}
    return orjson.dumps({"a": a, "b": b, "stop": stop})


@pytest.mark.parametrize(
    ("fmt", "bound"),
    [
        pytest.param("png", CHUNK_MIB + PICTURE_MIB + SLACK, id="png"),
        # and 24 bytes a position compared (512 here)
        pytest.param("json", CHUNK_MIB + SLACK, id="json"),
    ],
)
def test_a_compare_holds_a_chunk_of_its_tables(fmt: str, bound: float) -> None:
    with (
        serving({"PE_LOG_LEVEL": "warning"}) as (url, process),
        httpx.Client(base_url=url, timeout=300) as client,
    ):
        client.get(f"{TABLE}?max_len=2&d_model=2")  # the first request's imports
        idle = rss_mib(process.pid)
        body = comparison(65536, 512)
        answer = client.post(f"/v1/compare?format={fmt}", content=body, headers=JSON)
        assert answer.status_code == 200, answer.text
        held = peak_mib(process.pid) - idle
    print(f"\ncompare as {fmt}, {len(body)}-byte request: peak +{held:.0f} MiB")
    assert held <= bound


def test_compares_at_once_take_turns() -> None:
    """Eight pictures at once (the most the Kubernetes settings allow each): at most one a
    core computes or draws, the others wait holding their bodies."""
    with (
        serving({"PE_LOG_LEVEL": "warning"}) as (url, process),
        httpx.Client(base_url=url, timeout=600) as client,
    ):
        client.get(f"{TABLE}?max_len=2&d_model=2")
        idle = rss_mib(process.pid)
        body = comparison(16384, 512)

        def post(_: int) -> int:
            return client.post("/v1/compare?format=png", content=body, headers=JSON).status_code

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(post, range(8))) == [200] * 8
        held = peak_mib(process.pid) - idle
    print(f"\n8 compares at once: peak +{held:.0f} MiB")
    assert held <= available() * (CHUNK_MIB + 64 * 900 * 640 / MiB) + 42 + SLACK

"""The library engine in answers: ``X-Library-Engine`` on every answer computed with it
(tables, posted positions, applies, audits) and on none other, and an ETag that counts it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from service.encodings import kernels, registry, rotary, timestep
from service.web.answers import Offer, Plan
from tests.support import client_of

HEADER = "x-library-engine"


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "engine"),
    [
        pytest.param("/v1/encodings/timestep?dim=8&max_len=4", True, id="timestep"),
        pytest.param("/v1/encodings/timestep?dim=8&max_len=4&preset=wan", False, id="wan-float64"),
        pytest.param(
            "/v1/encodings/timestep?dim=8&max_len=4&rounding=exact", False, id="timestep-exact"
        ),
        pytest.param("/v1/encodings/rotary?head_dim=8&max_len=4", True, id="rotary"),
        pytest.param(
            "/v1/encodings/rotary?head_dim=8&max_len=4&rounding=exact", False, id="rotary-exact"
        ),
        pytest.param(
            "/v1/encodings/sinusoidal?d_model=8&max_len=4&preset=fairseq", True, id="fairseq"
        ),
        pytest.param(
            "/v1/encodings/sinusoidal?d_model=8&max_len=4&preset=tf-tutorial", False, id="tf"
        ),
        pytest.param("/v1/encodings/temperature?max_len=4", True, id="temperature"),
        pytest.param("/v1/encodings/sincos-2d?height=2&width=2&dim=8&preset=timm", True, id="timm"),
        pytest.param("/v1/encodings/sincos-2d?height=2&width=2&dim=8", False, id="mae"),
        pytest.param("/v1/encodings/rope-nd?grid=2,2&preset=qwen-image", True, id="qwen-image"),
        pytest.param("/v1/encodings/rope-nd?grid=2,2&preset=flux", False, id="flux-float64"),
        pytest.param("/v1/audit/rotary?head_dim=8&max_len=4", True, id="audit"),
        pytest.param("/v1/audit/sinusoidal?d_model=8&max_len=4", False, id="audit-vaswani"),
    ],
)
def test_answers_computed_with_the_engine_name_it(
    http: httpx.Client, path: str, engine: bool
) -> None:
    answer = http.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers.get(HEADER) == (kernels.label() if engine else None)


def test_posted_timesteps_name_it(http: httpx.Client) -> None:
    answer = http.post(
        "/v1/encodings/timestep/positions?dim=8&max_len=1", json={"position_ids": [0.5, 2.0]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers[HEADER] == kernels.label()


def test_the_audit_document_names_it(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/rotary?head_dim=8&max_len=4")
    assert answer.json()["library_engine"] == kernels.label()
    assert "library_engine" not in http.get("/v1/audit/sinusoidal?d_model=8&max_len=4").json()


def test_a_family_says_which_keys_the_engine_computes() -> None:
    library = timestep.TimestepKey(8)
    assert registry.library_engine(library) == kernels.label()
    assert registry.library_engine(timestep.TimestepKey(8, rounding="exact")) is None
    assert registry.library_engine(timestep.TimestepKey(8, rounding="exact"), library)
    assert registry.library_engine(rotary.RotaryKey(8, rounding="exact")) is None


async def _nothing(fmt: str, gzip: bool) -> tuple[dict[str, str], bytes]:
    return {}, b""


@pytest.mark.parametrize("engine", [None, "numpy", "torch 2.13.0+cpu AVX2"])
def test_the_etag_counts_the_engine(engine: str | None) -> None:
    def plan(engine: str | None) -> Plan[str]:
        return Plan(Offer(("json",)), _nothing, etag=lambda fmt, gzip: '"tag"', engine=engine)

    others = {plan(other).tag("json", False) for other in (None, "numpy", "torch 2.13.0+cpu AVX2")}
    assert plan(engine).tag("json", False) in others
    assert len(others) == 3


def test_the_presets_name_it(http: httpx.Client) -> None:
    listed = http.get("/v1/presets").json()
    assert listed["library_engine"] == kernels.label()
    engines = {preset["name"]: preset["library_engine"] for preset in listed["presets"]}
    assert engines["fairseq"] == engines["pytorch-tutorial"] == kernels.label()
    assert engines["tf-tutorial"] is None
    assert engines["vaswani"] is None

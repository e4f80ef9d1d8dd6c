"""A number of 400 digits in a JSON body: orjson reads it as infinity, and the refusal
said "not valid JSON (NaN and Infinity are not JSON): number is infinity", naming no field.
It says the number is out of range, and names the field that holds it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support import assert_problem, client_of

HUGE = "1" + "0" * 400
TABLE = '{"family": "rotary", "parameters": {"head_dim": 8}}'


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/v1/encodings/rotary/positions?max_len=8&head_dim=2",
            f'{{"position_ids": [1, {HUGE}]}}',
            "position_ids",
        ),
        (
            "/v1/encodings/rotary/from-config?max_len=4",
            f'{{"head_dim": 8, "rope_theta": {HUGE}}}',
            "rope_theta",
        ),
        ("/v1/positions/mrope", f'{{"segments": [{{"text": {HUGE}}}]}}', "text"),
        ("/v1/compare", f'{{"a": {TABLE}, "b": {TABLE}, "stop": {HUGE}}}', "stop"),
        ("/v1/encodings/sinusoidal/apply", f'{{"embeddings": [[{HUGE}]]}}', "embeddings"),
    ],
    ids=["positions", "config", "mrope", "compare", "apply"],
)
def test_a_number_out_of_range_is_named(
    http: httpx.Client, path: str, body: str, field: str
) -> None:
    answer = http.post(path, content=body, headers={"content-type": "application/json"})
    problem = assert_problem(answer, 400, f"number in {field} out of range", "401 characters")
    assert problem["field"] == field
    assert "Infinity" not in problem["detail"]

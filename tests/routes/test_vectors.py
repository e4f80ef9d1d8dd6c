"""The test vectors ``GET /v1/presets`` gives each preset: the SHA-256 of the reference
table's raw bytes and its entries far out are what the service answers for the same query,
and the hashes of two tables are pinned (a change of the tables' bytes is deliberate, with
``TABLE_REVISION``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.encodings.catalogue import PRESETS
from tests.support import client_of, load, sample

PINNED = {
    ("vaswani", "exact"): "fd38fa1de867ecaeebeab7fbc0d98b8c9a102c7aadc3bdf13fe14771da449a88",
    ("fairseq", "library"): "da4c67325223dfab4a34a1ffe4cfdbe0e10ef409a5919fac5aac09b4bf674917",
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


@pytest.fixture(scope="module")
def listed(http: httpx.Client) -> dict[str, Any]:
    return {preset["name"]: preset for preset in http.get("/v1/presets").json()["presets"]}


@pytest.mark.parametrize("name", sample(PRESETS, 2))
def test_the_vectors_are_the_services_answers(
    http: httpx.Client, listed: dict[str, Any], name: str
) -> None:
    vectors = listed[name]["test_vectors"]
    assert [vector["rounding"] for vector in vectors] == ["library", "exact"]
    for vector in vectors:
        raw = http.get(f"/v1/encodings/sinusoidal?{vector['query']}&format=raw")
        assert raw.status_code == 200
        assert raw.headers["x-shape"] == ",".join(map(str, vector["shape"]))
        assert hashlib.sha256(raw.content).hexdigest() == vector["sha256"]
        for entry in vector["far"]:
            row = entry["row"]
            query = vector["query"].replace("max_len=64", f"max_len={row + 1}")
            answer = http.get(f"/v1/encodings/sinusoidal?{query}&start={row}&format=npy")
            value = load(answer)[0, entry["column"]]
            assert value == np.float32(entry["value"])


def test_two_tables_are_pinned(listed: dict[str, Any]) -> None:
    for (name, rounding), digest in PINNED.items():
        (vector,) = [v for v in listed[name]["test_vectors"] if v["rounding"] == rounding]
        assert vector["sha256"] == digest

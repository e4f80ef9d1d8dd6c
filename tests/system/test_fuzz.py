"""Schema fuzzing: schemathesis generates requests from the committed OpenAPI document and
checks every answer of a real server against it. Bounded: a fixed number of examples per
operation and a fixed seed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import ROOT, running

pytestmark = pytest.mark.slow

SPEC = ROOT / "openapi" / "openapi.json"


@schemathesis.serializer("application/x-npy", "application/x-npz", "application/x-safetensors")
def binary(ctx: schemathesis.SerializationContext, value: object) -> bytes:
    """Binary bodies go out as generated: mostly not valid .npy, which must get a 4xx."""
    return value if isinstance(value, bytes) else str(value).encode()


schema = schemathesis.openapi.from_path(SPEC)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running() as base:
        yield base


@schema.parametrize()
@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_conforms(case: Case[Any], url: str) -> None:
    case.call_and_validate(base_url=url, checks=CHECKS)

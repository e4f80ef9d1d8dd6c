"""From-config's one merge (:meth:`service.web.declared.FromDocument.parameters`), as the
table's ``GET``, its per-layer answer, its audit and compare call it: driven without HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from service.errors import InvalidParameter
from service.schemas.common import Read
from service.web.declared import FromDocument

SPEC = FromDocument(
    read=lambda body: {},
    fields=lambda document, asked: {},
    query=BaseModel,
    summary="",
    operation_id="",
    body="",
    missing={"max_len": "the config has no max_position_embeddings: give max_len"},
    reading=("layer_type", "head_dim_key"),
)
ONE = Read({"": {"head_dim": 8, "base": 10000.0, "max_len": 16}})
TWO = Read({"sliding": {"head_dim": 8}, "full": {"head_dim": 16}}, ["sliding", "full"])


def test_the_requests_parameters_win_and_the_reading_ones_are_left_out() -> None:
    asked = {"base": 5.0, "layer_type": "full", "head_dim_key": "x", "dtype": "float64"}
    given = SPEC.parameters(ONE, asked)
    assert given == {"head_dim": 8, "base": 5.0, "max_len": 16, "dtype": "float64"}
    assert list(given) == ["head_dim", "base", "max_len", "dtype"]  # a Content-Location's order


def test_a_callers_defaults_are_under_both() -> None:
    """A comparison's range is a table's length where neither the config nor it says one."""
    assert SPEC.parameters(ONE, {}, under={"max_len": 64})["max_len"] == 16
    assert SPEC.parameters(ONE, {"max_len": 8}, under={"max_len": 64})["max_len"] == 8
    named = SPEC.parameters(TWO, {}, "full", under={"max_len": 64})
    assert named == {"head_dim": 16, "max_len": 64}


@pytest.mark.parametrize(
    ("read", "table", "detail"),
    [
        pytest.param(Read({"": {}}), "", "give max_len", id="one"),
        pytest.param(TWO, "sliding", "give max_len (sliding)", id="of-several"),
    ],
)
def test_a_missing_parameter_is_refused_as_the_family_says(
    read: Read, table: str, detail: str
) -> None:
    with pytest.raises(InvalidParameter) as refused:
        SPEC.parameters(read, {}, table)
    errors: list[dict[str, Any]] = refused.value.extensions["errors"]
    assert errors[0]["name"] == "max_len"
    assert errors[0]["detail"].endswith(detail)
    assert SPEC.parameters(read, {"max_len": 4}, table)["max_len"] == 4


def test_several_says_why_one_table_cannot_be_served() -> None:
    assert SPEC.several(ONE) is None
    assert SPEC.several(TWO) == "the config makes one table per layer type (sliding, full)"

"""The window every table query shares: rows start .. stop-1 of max_len."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import Field, ValidationError

from service.schemas.alibi import BiasQuery
from service.schemas.common import Window
from service.schemas.llama4 import TemperatureQuery
from service.schemas.rotary import RotaryTableQuery
from service.schemas.sinusoidal import RowsQuery


class Rows(Window):
    ROWS: ClassVar[str] = "items are 0 .. max_len-1"

    max_len: int = Field(ge=1)
    width: int = 1
    start: int = Field(0, ge=0)
    stop: int | None = Field(None, ge=1)


def refusal(**query: int) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        Rows(**query)
    (error,) = caught.value.errors()
    return str(error["loc"][0]), error["msg"]


def test_the_window_defaults_to_the_whole_table() -> None:
    rows = Rows(max_len=5)
    assert (rows.start, rows.row_stop) == (0, 5)
    assert Rows(max_len=5, start=1, stop=3).row_stop == 3


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        pytest.param(
            {"max_len": 4, "start": 4},
            ("start", "must be less than max_len (4); items are 0 .. max_len-1"),
            id="start-past",
        ),
        pytest.param(
            {"max_len": 4, "start": 2, "stop": 2},
            ("stop", "must be greater than start (2)"),
            id="stop-empty",
        ),
        pytest.param(
            {"max_len": 4, "stop": 5}, ("stop", "must be at most max_len (4)"), id="stop-past"
        ),
    ],
)
def test_the_window_refuses_rows_outside_the_table(
    query: dict[str, int], refused: tuple[str, str]
) -> None:
    assert refusal(**query) == refused


@pytest.mark.parametrize("model", [RowsQuery, RotaryTableQuery, BiasQuery, TemperatureQuery])
def test_every_table_query_has_the_window(model: type[Window]) -> None:
    assert issubclass(model, Window)
    assert {"max_len", "start", "stop"} <= model.model_fields.keys()

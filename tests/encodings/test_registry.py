"""The shared check every table row passes (registry.fill and registry.take): finite, and
within the bound the family declares, else a 422 naming the parameters it says set it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import registry
from service.encodings.registry import Bound, DType, Family, Rows
from service.errors import InvalidParameter


@dataclass(frozen=True, slots=True)
class FlatKey:
    """Rows of one value, ``level``; the family bounds them by ``limit``."""

    level: float
    limit: float = 1.0
    dtype: DType = "float32"
    width: int = 3


def fill(key: FlatKey, start: int, out: Sequence[Rows]) -> None:
    with np.errstate(over="ignore"):
        for part in out:
            part[...] = key.level


def take(key: FlatKey, positions: NDArray[np.int64]) -> Rows:
    out = np.empty((len(positions), key.width), key.dtype)
    fill(key, 0, [out])
    return out


@pytest.fixture(autouse=True)
def flat() -> Iterator[Family[FlatKey]]:
    family = Family("flat", FlatKey, fill, take, lambda key: Bound(key.limit, ("level", "limit")))
    with registry.registered(family) as known:
        yield known


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(FlatKey(float("nan")), id="nan"),
        pytest.param(FlatKey(float("inf")), id="inf"),
        pytest.param(FlatKey(-2.0), id="past-the-bound"),
        pytest.param(FlatKey(1e5, limit=1e6, dtype="float16"), id="float16-overflow"),
    ],
)
def test_rows_out_of_their_bound_are_refused_naming_the_parameters(key: Any) -> None:
    computations: list[Callable[[], Rows]] = [
        lambda: registry.rows(key, 0, 4),
        lambda: registry.take(key, np.arange(3)),
    ]
    for compute in computations:
        with pytest.raises(InvalidParameter) as caught:
            compute()
        names = [error["name"] for error in caught.value.extensions["errors"]]
        assert names[:2] == ["level", "limit"]
        assert ("dtype" in names) == (key.dtype != "float64")
        assert "flat table" in caught.value.detail


def test_rows_within_their_bound_pass_with_rounding_to_spare() -> None:
    assert registry.rows(FlatKey(1.0), 0, 4).max() == 1.0
    assert registry.take(FlatKey(-1.001, limit=1.0), np.arange(2)).min() < -1  # float16 slack
    assert registry.rows(FlatKey(5.0, limit=5.0), 2, 2).size == 0  # no rows: nothing checked


def test_a_family_that_declares_no_bound_is_held_to_finite_values() -> None:
    family = Family("open", FlatKey, fill, take)
    assert family.bound(FlatKey(1e300)).largest == float("inf")
    assert family.shift(FlatKey(0.0)) == 0


def test_a_registration_ends_with_its_block() -> None:
    from service.encodings.sinusoidal import FAMILY, SinusoidalKey

    def fill_none(key: SinusoidalKey, start: int, out: Sequence[Rows]) -> None:
        pass

    stand_in = Family("sinusoidal", SinusoidalKey, fill_none, FAMILY.take)
    with registry.registered(stand_in):
        assert registry.family_of(SinusoidalKey(4)) is stand_in
    assert registry.family_of(SinusoidalKey(4)) is FAMILY

    @dataclass(frozen=True, slots=True)
    class Unknown:
        width: int = 1
        dtype: DType = "float32"

    with pytest.raises(TypeError, match="not a registered family"):
        registry.family_of(Unknown())

"""The library engine: the numpy engine's functions are correctly rounded, ``auto`` falls
back to it without torch, and ``torch`` without torch is refused (torch is not needed here:
the conformance tests run the torch engine against the libraries)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, get_args

import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import kernels
from service.settings import Settings

ARGUMENTS = np.random.default_rng(7).uniform(-200, 200, 4096).astype(np.float32)


@pytest.fixture
def numpy_engine() -> Iterator[None]:
    before = kernels.engine()
    kernels.use("numpy")
    yield
    kernels.use(before)


@pytest.mark.usefixtures("numpy_engine")
@pytest.mark.parametrize(
    ("function", "reference", "arguments"),
    [
        pytest.param(kernels.sin, np.sin, ARGUMENTS, id="sin"),
        pytest.param(kernels.cos, np.cos, ARGUMENTS, id="cos"),
        pytest.param(kernels.exp, np.exp, ARGUMENTS / 4, id="exp"),
        pytest.param(kernels.log1p, np.log1p, np.abs(ARGUMENTS), id="log1p"),
    ],
)
def test_the_numpy_engine_rounds_the_float64_function_once(
    function: Callable[[NDArray[Any]], NDArray[np.float32]],
    reference: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    arguments: NDArray[np.float32],
) -> None:
    found = function(arguments)
    assert found.dtype == np.float32
    np.testing.assert_array_equal(found, reference(arguments.astype(np.float64)).astype(np.float32))


@pytest.mark.usefixtures("numpy_engine")
def test_the_numpy_engine_s_pow_takes_a_float32_base() -> None:
    exponents = np.arange(0, 128, 2).astype(np.float32) / np.float32(128)
    found = kernels.pow(500000.0, exponents)
    expected = np.power(np.float64(500000.0), exponents.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(found, expected)
    # a base past float32's precision is rounded to float32 first, as torch takes a number
    assert kernels.pow(1e8 + 1, np.ones(1, np.float32))[0] == np.float32(1e8 + 1)


@pytest.mark.usefixtures("numpy_engine")
def test_the_numpy_engine_is_named_numpy() -> None:
    assert kernels.engine() == "numpy"
    assert kernels.label() == "numpy"


def test_the_setting_takes_the_engines_choices() -> None:
    field = Settings.model_fields["library_engine"]
    assert get_args(field.annotation) == kernels.CHOICES
    assert field.default == "auto"


def test_auto_is_numpy_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_torch", None)
    monkeypatch.setattr(kernels, "_import_torch", lambda: None)
    assert kernels.resolve("auto") == "numpy"
    assert kernels.resolve("numpy") == "numpy"


def test_torch_without_torch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_torch", None)
    monkeypatch.setattr(kernels, "_import_torch", lambda: None)
    with pytest.raises(kernels.EngineUnavailable, match="torch extra"):
        kernels.use("torch")


@pytest.mark.usefixtures("numpy_engine")
def test_a_base_past_float32_s_range_is_infinite_without_a_warning() -> None:
    found = kernels.pow(1e300, np.array([0.0, 0.5], dtype=np.float32))
    np.testing.assert_array_equal(found, np.array([1.0, np.inf], dtype=np.float32))

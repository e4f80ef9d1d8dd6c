"""Fixtures of the conformance tests: the service in process, and the record of the largest
differences measured, printed at the end of the session (seen with ``-s``) and written to
``artifacts/conformance.md``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from service.app import create_app
from service.encodings import kernels
from service.settings import Settings
from tests.support import ROOT, in_process

# keras (keras-hub) computes with torch; TensorFlow, which keras-hub installs, keeps quiet
os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ARTIFACT = ROOT / "artifacts" / "conformance.md"
BLOCKS = ("small", "far")  # rows 0..4095 and 100000..100063


@dataclass
class Largest:
    """The largest difference of one comparison in one block of positions, and where."""

    value: float = -1.0
    where: str = ""
    ratio: float = 0.0  # the largest difference / its bound, over every entry


@dataclass
class Record:
    """Largest differences by (preset, comparison) and block (``small`` or ``far``)."""

    rows: dict[tuple[str, str], dict[str, Largest]] = field(default_factory=dict)

    def add(
        self,
        preset: str,
        comparison: str,
        block: str,
        difference: NDArray[np.floating],
        where: str,
        bound: NDArray[np.floating] | None = None,
    ) -> None:
        largest = self.rows.setdefault((preset, comparison), {}).setdefault(block, Largest())
        value = float(np.max(difference)) if difference.size else 0.0
        if value > largest.value:
            largest.value, largest.where = value, where
        if bound is not None and difference.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(difference == 0, 0.0, difference / bound)
            largest.ratio = max(largest.ratio, float(np.max(ratio)))

    def markdown(self) -> str:
        lines = [
            "| preset | comparison | largest difference, rows 0..4095 | largest difference, "
            "rows 100000..100063 | largest difference / bound |",
            "|---|---|---|---|---|",
        ]
        for (preset, comparison), blocks in sorted(self.rows.items()):
            cells = []
            for block in BLOCKS:
                largest = blocks.get(block)
                cells.append("-" if largest is None else f"{largest.value:.3g} ({largest.where})")
            ratios = [largest.ratio for largest in blocks.values() if largest.ratio]
            ratio = f"{max(ratios):.2f}" if ratios else "-"
            lines.append(f"| {preset} | {comparison} | {cells[0]} | {cells[1]} | {ratio} |")
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def record() -> Iterator[Record]:
    """The record; at the end of the session, its table printed and written."""
    found = Record()
    yield found
    if not found.rows:
        return
    table = found.markdown()
    print("\n\nConformance: largest differences measured\n\n" + table)
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(
        "# Conformance: the largest differences measured\n\n"
        "Written by tests/conformance. Row r is position r (r + start_index where given); "
        "mpmath's rows are 64 of 0..4095 and all of 100000..100063. Bounds: rounding=library "
        "against a library, 2^-22 (1 + |angle|) (mlx: times its scale and 2.2); "
        "rounding=exact against mpmath, half a float32 ulp + 2^-50 |x| + 2^-100 |angle| "
        "(float32) or 2^-51 (float64; both times mlx's scale).\n\n" + table
    )


@pytest.fixture(scope="session", autouse=True)
def torch_engine() -> None:
    """The torch engine (:mod:`service.encodings.kernels`): the libraries' own kernels, as
    the service picks them where torch imports; it fails where torch does not."""
    kernels.use("torch")


@pytest.fixture
def numpy_engine() -> Iterator[None]:
    """The numpy engine (correctly rounded functions) for one test; then torch's again. Its
    tests call the encodings directly: the session's service keeps its cache of torch's."""
    kernels.use("numpy")
    try:
        yield
    finally:
        kernels.use("torch")


@pytest.fixture(scope="session")
def service() -> Iterator[httpx.Client]:
    """The app with default settings, in process."""
    with in_process(create_app(Settings())) as http:
        yield http

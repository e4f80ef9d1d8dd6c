"""What an audit will evaluate, counted before it runs (:func:`service.audit.report.cost`):
the positions of its plan exactly, and a bound on the entries it evaluates (its plan's, the
dense scan of the first crossings, the refinements past it), with no array built."""

from __future__ import annotations

import functools
import operator
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from service.audit import bands, paths, report
from service.encodings.alibi import BiasKey
from service.encodings.registry import Key
from service.schemas.mrope import RopeQuery
from service.schemas.sinusoidal import TableQuery
from tests.audit.counting import counting

# the attack of a dense scan past the head (9.2 CPU s, charged as a 2.9 s audit)
ATTACK = {"head_dim": 2, "scaling": "linear", "factor": 0.1, "base": 31}
LLAMA = {"head_dim": 8, "base": 500000, "scaling": "llama3", "factor": 8}
LLAMA |= {"low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 512}


def rotary(**query: Any) -> Key:
    return RopeQuery.model_validate({"max_len": 1, **query}).key()


def sinusoidal(**query: Any) -> Key:
    return TableQuery.model_validate({"max_len": 1, **query}).key()


# key, max_len, paths (None: every one), band edges
AUDITS = [
    pytest.param(rotary(**ATTACK), 4096, None, None, id="attack-scans"),
    pytest.param(rotary(**ATTACK), 1 << 20, None, None, id="attack-refines"),
    pytest.param(rotary(**LLAMA), 1 << 25, ["library", "device"], None, id="llama-far"),
    pytest.param(rotary(**LLAMA), 100_000, None, [7, 300, 5000], id="llama-bands"),
    pytest.param(sinusoidal(d_model=4, preset="fairseq"), 1 << 22, None, None, id="fairseq"),
    pytest.param(BiasKey(4, 200_000, 200_000), 200_000, None, None, id="alibi"),
]


@pytest.fixture
def small_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The head and the dense scan a few thousand entries, so that every kind of work an
    audit does is done in milliseconds (the real ones: 2^21 and 2^23 entries)."""
    monkeypatch.setattr(report, "SCAN", 1 << 8)
    monkeypatch.setattr(report, "SCAN_FIRST", 1 << 13)


@pytest.mark.usefixtures("small_scans")
@pytest.mark.parametrize(("key", "max_len", "chosen", "edges"), AUDITS)
def test_an_audit_evaluates_at_most_what_it_is_counted(
    monkeypatch: pytest.MonkeyPatch,
    key: Key,
    max_len: int,
    chosen: list[str] | None,
    edges: list[int] | None,
) -> None:
    chosen = chosen or report.names(key)
    counted = report.cost(key, max_len, chosen, edges)
    assert counted.positions == len(report.plan(key, max_len, bands.bands(max_len, edges)))
    evaluated = counting(monkeypatch)
    report.audit(key, max_len, chosen, edges)
    assert 0 < evaluated[0] <= counted.numbers
    assert counted.charge >= counted.numbers * report.NUMBER_COST


@pytest.mark.slow
def test_the_attack_evaluates_at_most_what_it_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request of the attack itself: every position to 3,355,445 scanned for six paths."""
    key = rotary(**ATTACK)
    counted = report.cost(key, 1 << 22, report.names(key), None)
    evaluated = counting(monkeypatch)
    found = report.audit(key, 1 << 22, report.names(key), None)
    assert found["paths"][0]["first_over"]["1e-3"] == 3355445  # found by the dense scan
    assert evaluated[0] <= counted.numbers


@pytest.mark.usefixtures("small_scans")
@pytest.mark.parametrize(("key", "max_len", "chosen", "edges"), AUDITS)
def test_the_plan_is_the_samples_and_the_head_in_order(
    key: Key, max_len: int, chosen: list[str] | None, edges: list[int] | None
) -> None:
    """Evaluated a chunk at a time, never joined: the union of the bands' samples and every
    position of the head, each once, in order."""
    spans = bands.bands(max_len, edges)
    head = np.arange(min(max_len, report.SCAN // paths.width(key)))
    assert np.array_equal(report.plan(key, max_len, spans), np.union1d(bands.plan(spans), head))


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("an array was built")


def test_the_count_builds_no_array(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count of a plan of 2^21 positions (width 1, to 2^31) builds none: it is counted
    over the bands."""
    keys = [rotary(**ATTACK), sinusoidal(d_model=1), BiasKey(1, 1 << 31, 1 << 31), rotary(**LLAMA)]
    for name in ("arange", "unique", "union1d", "concatenate", "array", "asarray", "zeros"):
        monkeypatch.setattr(np, name, refuse)
    for key in keys:
        for max_len, edges in [(1 << 31, None), (1 << 31, [3, 1 << 20, 1 << 30]), (5, None)]:
            counted = report.cost(key, max_len, report.names(key), edges)
            assert counted.positions >= 5


@pytest.mark.parametrize("seed", range(2))
def test_the_count_of_a_plan_is_its_length(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        max_len = rng.randrange(1, 1 << rng.randrange(1, 31))
        edges = sorted(rng.sample(range(1, max_len), min(max_len - 1, 5))) if seed % 2 else None
        spans = bands.bands(max_len, edges)
        head = rng.randrange(0, min(max_len, 1 << 12) + 1)
        planned = np.union1d(bands.plan(spans), np.arange(head))
        assert bands.count(spans, head) == len(planned)
        gaps = np.diff(bands.plan(spans))
        assert bands.widest(spans) >= (gaps.max() if len(gaps) else 1)


def refinement(low: int, high: int, holds: Callable[[Any], Any]) -> tuple[int, int]:
    """What :func:`bands.refine` finds between ``low`` and ``high`` where ``holds`` says a
    position passes, and how many positions it evaluated."""
    seen = [0]

    def measure(at: Any) -> tuple[Any, None]:
        seen[0] += len(at)
        return at, None

    return bands.refine(measure, low, high, lambda at, _: holds(at)), seen[0]


@pytest.mark.parametrize("seed", range(4))
def test_a_refinement_evaluates_at_most_what_is_counted(seed: int) -> None:
    """Between two positions ``gap`` apart, whichever position it holds first at (and
    whatever it does past it), a refinement evaluates at most :func:`bands.refined`."""
    rng = random.Random(seed)
    for _ in range(300):
        low = rng.randrange(0, 1 << 20)
        gap = rng.randrange(2, 1 << rng.randrange(2, 31))
        first = low + rng.randrange(1, gap + 1)
        scattered = rng.sample(range(first, low + gap + 1), min(low + gap - first, 20))
        holds: Callable[[Any], Any] = (
            functools.partial(operator.le, first)
            if seed % 2
            else functools.partial(np.isin, test_elements=[first, *scattered])
        )
        found, evaluated = refinement(low, low + gap, holds)
        assert found <= low + gap
        assert evaluated <= bands.refined(gap)

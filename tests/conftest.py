"""Fixtures: the app built from settings, in process and as a real ``python -m service``.

The contract fixtures (``api``, ``small_api``, ``own_api``) run each test twice: against the
app in process, in the fast loop (``-m "not slow"``), and against a real server, marked
``slow`` (CI's full run, which runs both): the in-process variant makes the same assertions
at a fraction of the cost. Each starts only the server or app its variant needs."""

from __future__ import annotations

import gc
import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from _pytest.mark.expression import Expression

from service.app import create_app
from service.settings import Settings
from tests.support import SMALL, SMALL_LIMITS, WAIT, Loop, client_of, running, started

# a module whose every test is slow says so once, at the top
_SLOW_MODULE = re.compile(r"^pytestmark = .*\bpytest\.mark\.slow\b", re.MULTILINE)


def pytest_configure(config: pytest.Config) -> None:
    Loop.inner = _leaves_out_slow(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (modules, test items, their parameters: half a million
    objects) lives as long as the run: frozen, it is no longer traversed by each full
    garbage collection, which took some 5 % of the inner loop's CPU."""
    gc.collect()
    gc.freeze()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A module of slow tests only is not even imported where ``-m`` leaves out every slow
    test (the inner loop, ``-m "not slow"``): collecting the schema fuzzing alone generates
    thousands of schemathesis cases, and the system tests import what they drive."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if _leaves_out_slow(config) and _SLOW_MODULE.search(collection_path.read_text()):
        return True
    return None


def _leaves_out_slow(config: pytest.Config) -> bool:
    """Whether the run's marker expression is false for a slow test whatever its other
    marks (each combination of the other names in the expression is tried)."""
    text = config.getoption("markexpr")
    if not text:
        return False
    expression = Expression.compile(text)
    others = sorted(set(re.findall(r"[\w.+-]+", text)) - {"and", "or", "not", "slow"})
    combinations = itertools.chain.from_iterable(
        itertools.combinations(others, count) for count in range(len(others) + 1)
    )
    return not any(expression.evaluate(_marked_with("slow", *marks)) for marks in combinations)


def _marked_with(*marks: str) -> Callable[..., bool]:
    """A matcher for :class:`Expression`: a test with exactly ``marks``."""
    return lambda name, **_: name in marks


@pytest.fixture(scope="session")
def live_url() -> Iterator[str]:
    with running() as url:
        yield url


@pytest.fixture(scope="session")
def small_live_url() -> Iterator[str]:
    with running(SMALL) as url:
        yield url


@pytest.fixture(scope="module")
def module_live_url() -> Iterator[str]:
    with running() as url:
        yield url


# The in-process counterparts of the three servers, each with the scope of its server:
# started once, as a real server is (its first answers build what every later one uses).
@pytest.fixture(scope="session")
def in_process_app() -> Iterator[httpx.BaseTransport]:
    with started(create_app(Settings())) as transport:
        yield transport


@pytest.fixture(scope="session")
def small_in_process_app() -> Iterator[httpx.BaseTransport]:
    with started(create_app(Settings.model_validate(SMALL_LIMITS))) as transport:
        yield transport


@pytest.fixture(scope="module")
def own_in_process_app() -> Iterator[httpx.BaseTransport]:
    with started(create_app(Settings())) as transport:
        yield transport


# the real server's variant of a contract test belongs to the system tests
KINDS = [pytest.param("live", marks=pytest.mark.slow), "in-process"]


@contextmanager
def client(request: pytest.FixtureRequest, live: str, in_process: str) -> Iterator[httpx.Client]:
    """httpx to the real server of the fixture ``live``, or to the app in process of the
    fixture ``in_process``, as the test's variant says: only that one is started."""
    if request.param == "live":
        with httpx.Client(base_url=request.getfixturevalue(live), timeout=WAIT) as http:
            yield http
    else:
        with client_of(request.getfixturevalue(in_process)) as http:
            yield http


@pytest.fixture(params=KINDS)
def api(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """An HTTP client for the service with default settings."""
    with client(request, "live_url", "in_process_app") as http:
        yield http


@pytest.fixture(params=KINDS)
def small_api(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """The same with small limits (``SMALL``)."""
    with client(request, "small_live_url", "small_in_process_app") as http:
        yield http


@pytest.fixture(params=KINDS)
def own_api(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """Like ``api``, with a server of the test module's own: ``/v1/cache`` lists the 20
    largest tables, so a test that looks for a small table of its own needs a server
    that few other tests have filled."""
    with client(request, "module_live_url", "own_in_process_app") as http:
        yield http

"""Fixtures: the app built from settings, in process and as a real ``python -m service``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from service.app import create_app
from service.settings import Settings
from tests.support import SMALL, SMALL_LIMITS, WAIT, in_process, running


@pytest.fixture(scope="session")
def live_url() -> Iterator[str]:
    with running() as url:
        yield url


@pytest.fixture(scope="session")
def small_live_url() -> Iterator[str]:
    with running(SMALL) as url:
        yield url


@contextmanager
def client(kind: str, url: str, settings: Settings) -> Iterator[httpx.Client]:
    """httpx to the real server at ``url``, or to the app built from ``settings`` in process."""
    if kind == "live":
        with httpx.Client(base_url=url, timeout=WAIT) as http:
            yield http
    else:
        with in_process(create_app(settings)) as http:
            yield http


@pytest.fixture(params=["live", "in-process"])
def api(request: pytest.FixtureRequest, live_url: str) -> Iterator[httpx.Client]:
    """An HTTP client for the service with default settings."""
    with client(request.param, live_url, Settings()) as http:
        yield http


@pytest.fixture(params=["live", "in-process"])
def small_api(request: pytest.FixtureRequest, small_live_url: str) -> Iterator[httpx.Client]:
    """The same with small limits (``SMALL``)."""
    with client(request.param, small_live_url, Settings.model_validate(SMALL_LIMITS)) as http:
        yield http


@pytest.fixture(scope="module")
def module_live_url() -> Iterator[str]:
    with running() as url:
        yield url


@pytest.fixture(params=["live", "in-process"])
def own_api(request: pytest.FixtureRequest, module_live_url: str) -> Iterator[httpx.Client]:
    """Like ``api``, with a server of the test module's own: ``/v1/cache`` lists the 20
    largest tables, so a test that looks for a small table of its own needs a server
    that few other tests have filled."""
    with client(request.param, module_live_url, Settings()) as http:
        yield http

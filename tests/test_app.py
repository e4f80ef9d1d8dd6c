"""The application: readiness with and after the preload, unexpected errors as problems,
the version from the package's metadata."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from importlib import metadata

from service import __version__
from service.app import create_app
from service.encodings import registry, sinusoidal
from service.encodings.sinusoidal import SinusoidalKey
from service.settings import Settings
from tests.support import TABLE, in_process, openapi_document


def test_the_version_is_the_packages() -> None:
    assert __version__ == metadata.version("positional-encoding-service")
    app = create_app(Settings())
    assert app.version == __version__
    assert openapi_document()["info"]["version"] == __version__


def test_a_503_readiness_is_a_problem() -> None:
    app = create_app(Settings())
    with in_process(app) as client:
        runtime = app.state.runtime
        deadline = time.monotonic() + 10
        while not runtime.ready and time.monotonic() < deadline:  # the (empty) preload
            time.sleep(0.01)
        runtime.ready = False
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "1"
        runtime.preload_error = "RuntimeError()"
        assert "failed" in client.get("/readyz").json()["detail"]


def test_the_preload_lands_in_the_cache_before_ready() -> None:
    app = create_app(Settings(preload="300x16:float64, 10x8"))
    with in_process(app) as client:
        deadline = time.monotonic() + 10
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = client.get("/v1/cache").json()
    keys = {(t["key"]["d_model"], t["key"]["dtype"]) for t in stats["tables"]}
    assert keys == {(16, "float64"), (8, "float32")}
    assert stats["misses"] == 2


def broken_family(error: Exception) -> AbstractContextManager[registry.Family[SinusoidalKey]]:
    """The sinusoidal family, registered with a ``fill`` that raises ``error``."""

    def fill(*args: object) -> None:
        raise error

    return registry.registered(registry.Family("sinusoidal", SinusoidalKey, fill, sinusoidal.take))


def test_a_failed_preload_keeps_the_service_unready() -> None:
    with broken_family(MemoryError("no room")):
        app = create_app(Settings(preload="8x8"))
        with in_process(app) as client:
            runtime = app.state.runtime
            deadline = time.monotonic() + 10
            while runtime.preload_error is None and time.monotonic() < deadline:
                time.sleep(0.01)
            response = client.get("/readyz")
            assert response.status_code == 503
            assert "no room" in response.json()["detail"]
            assert client.get("/healthz").status_code == 200


def test_an_unexpected_error_is_a_500_problem_without_internals() -> None:
    with broken_family(RuntimeError("secret internals")):
        with in_process(create_app(Settings()), raise_errors=False) as client:
            response = client.get(f"{TABLE}?max_len=3&d_model=3")
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/problem+json"
        assert "secret" not in response.text

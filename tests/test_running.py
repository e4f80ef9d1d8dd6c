"""Starting the service: ``python -m service``, the console script, settings, preload."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.main import create_app
from service.settings import Preload, Settings, parse_preload
from tests.conftest import running


def test_the_console_script_starts_the_service() -> None:
    script = shutil.which("pe-service", path=str(Path(sys.executable).parent))
    assert script is not None
    with running(command=[script]) as url:
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}


def test_several_workers_serve() -> None:
    with running({"PE_WORKERS": "2"}) as url:
        for _ in range(10):
            assert (
                httpx.get(url + "/v1/encodings/sinusoidal?max_len=4&d_model=4").status_code == 200
            )


def test_readyz_waits_for_the_preload() -> None:
    """Alive at once, ready only when every PE_PRELOAD table is in the cache."""
    env = {"PE_PRELOAD": "16x8, 8192x8192:float64", "PE_CACHE_BYTES": str(600 << 20)}
    seen = []
    with running(env) as url:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(url + "/readyz").status_code
            seen.append(status)
            if status == 200:
                break
            assert status == 503
            assert httpx.get(url + "/healthz").status_code == 200
            time.sleep(0.02)
        stats = httpx.get(url + "/v1/cache").json()
    assert seen[0] == 503
    assert seen[-1] == 200
    tables = {(e["d_model"], e["rows"], e["dtype"]) for e in stats["entries"]}
    assert tables == {(8, 16, "float32"), (8192, 8192, "float64")}
    assert stats["misses"] == 2


def test_a_503_readiness_is_a_problem() -> None:
    with TestClient(create_app(Settings())) as client:
        client.app.state.ready = False  # type: ignore[attr-defined]
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "1"
        client.app.state.preload_error = "RuntimeError()"  # type: ignore[attr-defined]
        assert "failed" in client.get("/readyz").json()["detail"]


@pytest.mark.parametrize(
    ("text", "tables"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("512x512", [Preload(512, 512)], id="one"),
        pytest.param(
            "512x512, 2048x1024@10000:split:float64",
            [Preload(512, 512), Preload(2048, 1024, 10000.0, "split", "float64")],
            id="two",
        ),
        pytest.param("4x5:float16@", None, id="bad-order"),
        pytest.param("4x5@1", None, id="base-one"),
        pytest.param("4x5@inf", None, id="base-inf"),
        pytest.param("4x5@ten", None, id="base-text"),
        pytest.param("4x5:int8", None, id="bad-dtype"),
        pytest.param("0x5", None, id="zero"),
        pytest.param("4by5", None, id="syntax"),
    ],
)
def test_preload_syntax(text: str, tables: list[Preload] | None) -> None:
    if tables is None:
        with pytest.raises(ValueError):  # noqa: PT011
            parse_preload(text)
    else:
        assert parse_preload(text) == tables


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PE_PORT", "9123")
    monkeypatch.setenv("PE_CACHE_BYTES", "1000")
    monkeypatch.setenv("PE_PRELOAD", "4x4")
    settings = Settings()
    assert (settings.port, settings.cache_bytes, settings.preload_tables) == (
        9123,
        1000,
        [Preload(4, 4)],
    )


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"preload": "4x"}, id="preload"),
        pytest.param({"preload": "1000x1000", "max_elements": 10}, id="preload-over-limit"),
        pytest.param({"cache_bytes": -1}, id="negative-budget"),
        pytest.param({"port": 70000}, id="port"),
    ],
)
def test_bad_settings_are_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings(**values)  # type: ignore[arg-type]


def test_a_failed_preload_keeps_the_service_unready(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise MemoryError("no room")

    monkeypatch.setattr("service.core.encoding", broken)
    with TestClient(create_app(Settings(preload="8x8"))) as client:
        deadline = time.monotonic() + 10
        while client.app.state.preload_error is None and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "no room" in response.json()["detail"]
        assert client.get("/healthz").status_code == 200


def test_an_unexpected_error_is_a_500_problem_without_internals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr("service.core.encoding", broken)
    with TestClient(create_app(Settings()), raise_server_exceptions=False) as client:
        response = client.get("/v1/encodings/sinusoidal?max_len=3&d_model=3")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "secret" not in response.text

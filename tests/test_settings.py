"""Settings: read from ``PE_*`` variables, refused when out of range."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.settings import POSITION_CEILING, Settings


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PE_PORT", "9123")
    monkeypatch.setenv("PE_CACHE_BYTES", "1000")
    monkeypatch.setenv("PE_PRELOAD", "4x4")
    monkeypatch.setenv("PE_MAX_POSITION", "65535")
    settings = Settings()
    assert (settings.port, settings.cache_bytes, settings.preload, settings.max_position) == (
        9123,
        1000,
        "4x4",
        65535,
    )


def test_connections_and_bodies_have_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings().head_timeout, Settings().body_timeout) == (10, 30)
    monkeypatch.setenv("PE_HEAD_TIMEOUT", "0.5")
    monkeypatch.setenv("PE_BODY_TIMEOUT", "2.5")
    assert (Settings().head_timeout, Settings().body_timeout) == (0.5, 2.5)


def test_grpc_is_off_unless_a_port_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PE_GRPC_PORT", raising=False)
    assert Settings().grpc_port == 0
    monkeypatch.setenv("PE_GRPC_PORT", "8001")
    assert Settings().grpc_port == 8001


def test_positions_go_up_to_int32_by_default() -> None:
    assert Settings().max_position == POSITION_CEILING == 2**31 - 1


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"cache_bytes": -1}, id="negative-budget"),
        pytest.param({"port": 70000}, id="port"),
        pytest.param({"grpc_port": 70000}, id="grpc-port"),
        pytest.param({"grpc_port": -1}, id="grpc-port-negative"),
        pytest.param({"max_position": 2**31}, id="position-past-int32"),
        pytest.param({"max_position": -1}, id="position-negative"),
        pytest.param({"head_timeout": 0}, id="head-timeout-zero"),
        pytest.param({"head_timeout": "inf"}, id="head-timeout-infinite"),
        pytest.param({"body_timeout": -1}, id="body-timeout-negative"),
        pytest.param({"body_timeout": "nan"}, id="body-timeout-nan"),
    ],
)
def test_bad_settings_are_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings(**values)  # type: ignore[arg-type]

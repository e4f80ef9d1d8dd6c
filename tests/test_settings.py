"""Settings: read from ``PE_*`` variables, refused when out of range."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import ValidationError

from service.settings import (
    POSITION_CEILING,
    Settings,
    SettingsError,
    accepted,
    from_environment,
    parse_bytes,
    unknown_names,
)


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


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1024", 1024),
        ("0", 0),
        ("1024B", 1024),
        ("64KiB", 64 << 10),
        ("512MiB", 512 << 20),
        ("2GiB", 2 << 30),
        ("1TiB", 1 << 40),
        ("512mib", 512 << 20),
        ("2GIB", 2 << 30),
        ("64kib", 64 << 10),
        ("3 MiB", 3 << 20),
        (" 7 ", 7),
        ("8b", 8),
    ],
)
def test_byte_sizes_take_binary_units(text: str, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize(
    "text", ["2GB", "12KB", "64K", "1.5GiB", "-1", "-1MiB", "MiB", "", "1e6", "0x10", "5 PiB"]
)
def test_byte_sizes_refuse_other_forms(text: str) -> None:
    with pytest.raises(ValueError, match="KiB, MiB, GiB or TiB"):
        parse_bytes(text)


def test_byte_sizes_leave_numbers_to_the_integer() -> None:
    assert parse_bytes(1024) == 1024
    assert Settings(cache_bytes="64KiB").cache_bytes == 64 << 10


def test_byte_settings_read_units_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "PE_CACHE_BYTES": "2GiB",
        "PE_MAX_BODY_BYTES": "64MiB",
        "PE_MAX_CONFIG_BYTES": "512KiB",
        "PE_SLOW_CLIENT_BYTES": "1024",
        "PE_MIN_READ_RATE": "256kib",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = from_environment()
    assert (
        settings.cache_bytes,
        settings.max_body_bytes,
        settings.max_config_bytes,
        settings.slow_client_bytes,
        settings.min_read_rate,
    ) == (2 << 30, 64 << 20, 512 << 10, 1024, 256 << 10)


def test_unknown_names_are_the_pe_variables_that_are_no_setting() -> None:
    environ = {
        "PE_PORT": "1",
        "pe_workers": "2",  # pydantic-settings reads names in any case
        "PE_CACHE_SIZE": "1",
        "pe_colour": "blue",
        "PEPPER": "1",
        "HOME": "/",
    }
    assert unknown_names(environ) == ["PE_CACHE_SIZE", "pe_colour"]


def test_an_unknown_name_is_one_line_with_the_nearest_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PE_CACHE_SIZE", "1")
    with pytest.raises(SettingsError) as caught:
        from_environment()
    assert str(caught.value) == (
        "PE_CACHE_SIZE is not a setting; did you mean PE_CACHE_BYTES? (the settings: "
        "docs/settings.md)"
    )


def test_a_malformed_value_is_one_line_with_the_value_as_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PE_MIN_READ_RATE", "0KiB")
    monkeypatch.setenv("PE_PORT", "80a")
    with pytest.raises(SettingsError) as caught:
        from_environment()
    line = str(caught.value)
    assert "\n" not in line
    assert "PE_PORT='80a' is not valid: an integer from 0 to 65535" in line
    assert "PE_MIN_READ_RATE='0KiB' is not valid: a byte size greater than 0" in line


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_says_what_it_takes(name: str) -> None:
    """Numbers and choices in words from their types and bounds; text says it itself."""
    annotation = Settings.model_fields[name].annotation
    if annotation is str:
        assert accepted(name) is None
    else:
        assert accepted(name)


def test_the_library_engine_is_auto_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PE_LIBRARY_ENGINE", raising=False)
    assert Settings().library_engine == "auto"
    monkeypatch.setenv("PE_LIBRARY_ENGINE", "numpy")
    assert Settings().library_engine == "numpy"


def test_a_malformed_library_engine_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PE_LIBRARY_ENGINE", "cuda")
    with pytest.raises(SettingsError) as caught:
        from_environment()
    assert str(caught.value) == "PE_LIBRARY_ENGINE='cuda' is not valid: one of auto, torch, numpy"


def test_the_torch_engine_without_torch_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PE_LIBRARY_ENGINE", "torch")
    with pytest.raises(SettingsError) as caught:
        from_environment()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("PE_LIBRARY_ENGINE='torch' is not valid: torch is not installed")


def test_the_platforms_port_is_the_port_where_pe_port_is_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Knative gives a container its port as PORT (KServe's Knative mode): the image then
    listens there with no setting of ours."""
    monkeypatch.delenv("PE_PORT", raising=False)
    monkeypatch.setenv("PORT", "8080")
    assert from_environment().port == 8080
    monkeypatch.delenv("PORT")
    assert from_environment().port == 8000


@pytest.mark.parametrize("name", ["PE_PORT", "pe_port"])
def test_pe_port_wins_over_the_platforms_port(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PE_PORT", raising=False)
    monkeypatch.setenv("PORT", "8080")
    monkeypatch.setenv(name, "9123")
    assert from_environment().port == 9123


def test_a_malformed_platform_port_is_named_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PE_PORT", raising=False)
    monkeypatch.setenv("PORT", "80a")
    with pytest.raises(SettingsError) as caught:
        from_environment()
    assert str(caught.value) == "PORT='80a' is not valid: an integer from 0 to 65535"

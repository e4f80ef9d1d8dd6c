"""Service settings, read from ``PE_*`` environment variables by one pydantic-settings class.
Settings are plain values: what they mean to the encodings (``PE_PRELOAD``'s tables) is
parsed where the service starts (``service.preload``).

:func:`from_environment` is how the process reads them: an unknown ``PE_`` variable or a
malformed value is a :class:`SettingsError` of one line that names the variable and says
what it takes. Where ``PE_PORT`` is not set, the platform's ``PORT`` is the port: Knative
(KServe's Knative mode, Cloud Run) tells a container where to listen that way."""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.arrays import POSITION_CEILING as POSITION_CEILING

MiB: Final = 1 << 20
# an origin as browsers send it: scheme://host[:port], nothing after
_ORIGIN: Final = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s,*]+")
# a number of bytes: 1024, 1024B, 64KiB, 512 MiB, 2gib (IEC binary units only: "MB" is
# ambiguous, so it is refused rather than guessed)
_SIZE: Final = re.compile(r"(?P<number>\d+)\s*(?:(?P<unit>[kmgt])i)?b?", re.IGNORECASE)
_UNITS: Final = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
BYTES_FORM: Final = "an integer, or one with KiB, MiB, GiB or TiB (64KiB, 512MiB, 2GiB)"
WHERE: Final = "(the settings: docs/settings.md)"
# Knative's runtime contract: the port a container must listen on (its webhook refuses a
# PORT set by hand), taken where PE_PORT is not set
PLATFORM_PORT: Final = "PORT"


def parse_bytes(value: object) -> object:
    """``"512MiB"`` as 536870912 (``KiB``, ``MiB``, ``GiB``, ``TiB``, any case; a plain
    number or ``B`` is bytes); anything but text is left to the integer's own checks."""
    if not isinstance(value, str):
        return value
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a number of bytes: {BYTES_FORM}")
    unit = match["unit"]
    return int(match["number"]) * (_UNITS[unit.lower()] if unit else 1)


_BYTES: Final = BeforeValidator(parse_bytes)
Bytes = Annotated[int, _BYTES]


class Settings(BaseSettings):
    """Every knob of the service; ``PE_<NAME>`` in the environment sets ``<name>``."""

    model_config = SettingsConfigDict(env_prefix="PE_", frozen=True, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1)
    cache_bytes: Bytes = Field(512 * MiB, ge=0)
    max_elements: int = Field(1 << 26, ge=1)
    max_json_elements: int = Field(1 << 21, ge=1)
    max_body_bytes: Bytes = Field(64 * MiB, ge=1)
    # a model's config.json, posted to the rotary from-config endpoint (they are a few KiB)
    max_config_bytes: Bytes = Field(1 * MiB, ge=1)
    max_position: int = Field(POSITION_CEILING, ge=0, le=POSITION_CEILING)
    # the widest row (d_model, a batch's last axis): real models stay far below 65,536
    max_width: int = Field(1 << 16, ge=1)
    preload: str = ""
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["text", "json"] = "text"
    shutdown_timeout: int = Field(30, ge=0)
    # seconds of grace an answer has before its client must read at min_read_rate
    send_timeout: float = Field(10.0, gt=0, allow_inf_nan=False)
    # bytes a second a client must take an answer at, after the grace; else it is cut off
    min_read_rate: Bytes = Field(256 << 10, gt=0)
    # bytes of answers held for slow clients (a piece untaken for 2 s), all together
    slow_client_bytes: Bytes = Field(128 * MiB, ge=0)
    # bytes of posted bodies held at once, all together, from their first byte read until
    # their answer is computed; a body that would pass it is a 503 (Retry-After)
    posted_bytes: Bytes = Field(256 * MiB, ge=1)
    # seconds to send a whole request head, from its first byte or the connect; then 408
    head_timeout: float = Field(10.0, gt=0, allow_inf_nan=False)
    # seconds a posted body may go without a byte arriving; then 408
    body_timeout: float = Field(30.0, gt=0, allow_inf_nan=False)
    max_image_width: int = Field(2048, ge=320)
    max_image_height: int = Field(2048, ge=240)
    # the Open Inference Protocol over gRPC on PE_HOST:this port (the grpc extra); 0: off
    grpc_port: int = Field(0, ge=0, le=65535)
    # who may read answers from a page of another origin (CORS): "*" (the default: the
    # data is public and read-only), origins separated by commas, or "" for none
    cors_origins: str = "*"
    # what computes rounding=library where the library is torch: torch's own CPU kernels
    # (bitwise; the torch extra), numpy's correctly rounded functions (within an ulp), or
    # torch when it imports (service.encodings.kernels)
    library_engine: Literal["auto", "torch", "numpy"] = "auto"

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        # browsers send scheme and host in lower case
        origins = [part.strip().lower() for part in value.split(",") if part.strip()]
        if origins == ["*"]:
            return "*"
        for origin in origins:
            if not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"{origin!r} is not an origin (scheme://host[:port]); "
                    "give '*', origins separated by commas, or nothing"
                )
        return ",".join(origins)

    @model_validator(mode="after")
    def _ports(self) -> Settings:
        if self.grpc_port and self.grpc_port == self.port:
            raise ValueError(
                f"PE_GRPC_PORT={self.grpc_port} is HTTP's (PE_PORT): give another port, or 0"
            )
        return self

    @model_validator(mode="after")
    def _posted(self) -> Settings:
        largest = max(self.max_body_bytes, self.max_config_bytes)
        if self.posted_bytes < largest:
            raise ValueError(
                f"PE_POSTED_BYTES={self.posted_bytes} is less than the largest body a request "
                f"may post ({largest}, PE_MAX_BODY_BYTES or PE_MAX_CONFIG_BYTES): such a body "
                "would always be refused; raise it, or lower the other"
            )
        return self

    @model_validator(mode="after")
    def _engine(self) -> Settings:
        if self.library_engine == "torch" and importlib.util.find_spec("torch") is None:
            raise ValueError(
                "PE_LIBRARY_ENGINE='torch' is not valid: torch is not installed (the torch "
                "extra: pip install '.[torch]'); give auto or numpy"
            )
        return self

    def allowed_origins(self) -> frozenset[str] | None:
        """The origins CORS lets read answers: None for every origin, empty for none."""
        if self.cors_origins == "*":
            return None
        return frozenset(filter(None, self.cors_origins.split(",")))


SETTINGS: Final = {f"PE_{name.upper()}": name for name in Settings.model_fields}


class SettingsError(ValueError):
    """Settings the service cannot start with; its message is one line."""


def from_environment() -> Settings:
    """The settings in ``os.environ``, or a :class:`SettingsError` naming every unknown
    ``PE_`` variable, or else every malformed value."""
    unknown = unknown_names(os.environ)
    if unknown:
        raise SettingsError("; ".join(map(_not_a_setting, unknown)) + " " + WHERE)
    try:
        return Settings(**platform_settings(os.environ))
    except ValidationError as exc:
        raise SettingsError(describe(exc, os.environ)) from None


def platform_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings a platform gives in its own variables: ``PORT`` as the port, unless
    ``PE_PORT`` (in any case, as pydantic-settings reads it) says otherwise."""
    if PLATFORM_PORT in environ and "PE_PORT" not in {name.upper() for name in environ}:
        return {"port": environ[PLATFORM_PORT]}
    return {}


def variable(name: str, environ: Mapping[str, str]) -> str:
    """The environment variable that set setting ``name``: ``PE_<NAME>``, or ``PORT``."""
    return PLATFORM_PORT if name in platform_settings(environ) else f"PE_{name.upper()}"


def unknown_names(environ: Mapping[str, str]) -> list[str]:
    """The ``PE_`` variables in ``environ`` that are no setting (in any case, as
    pydantic-settings reads them)."""
    return sorted(
        name for name in environ if name.upper().startswith("PE_") and name.upper() not in SETTINGS
    )


def _not_a_setting(name: str) -> str:
    # matched without the prefix, which every name shares: PE_FOO is not near PE_HOST
    near = difflib.get_close_matches(name.upper()[3:], [known[3:] for known in SETTINGS], n=1)
    return f"{name} is not a setting" + (f"; did you mean PE_{near[0]}?" if near else "")


def describe(error: ValidationError, environ: Mapping[str, str]) -> str:
    """A validation error of :class:`Settings` as one line: each ``PE_`` variable, its
    value (as given in ``environ``, if there), and what it takes."""
    given = {key.upper(): value for key, value in environ.items()}
    problems = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        field = Settings.model_fields.get(name)
        if field is None:  # not a field's: a validator's words
            problems.append(" ".join(item["msg"].removeprefix("Value error, ").split()))
            continue
        source = variable(name, environ)
        value = repr(given.get(source, item["input"]))
        value = value if len(value) <= 80 else value[:77] + "..."
        takes = accepted(name)
        if takes is None:  # a validator's own words say what it takes
            takes = item["msg"].removeprefix("Value error, ")
        problems.append(f"{source}={value} is not valid: {' '.join(takes.split())}")
    return "; ".join(problems)


def accepted(name: str) -> str | None:
    """What setting ``name`` takes, in words, from its type and bounds (None for text)."""
    field = Settings.model_fields[name]
    if get_origin(field.annotation) is Literal:
        return "one of " + ", ".join(map(str, get_args(field.annotation)))
    bounds = _bounds(field.metadata)
    if _BYTES in field.metadata:
        return f"a byte size{bounds}: {BYTES_FORM}"
    if field.annotation is int:
        return f"an integer{bounds}"
    if field.annotation is float:
        return f"a finite number{bounds}"
    return None


def _bounds(metadata: list[Any]) -> str:
    # pydantic's Field(ge=...) and the like, as annotated_types' Ge, Le and Gt
    low, high, above = (
        next((getattr(m, bound) for m in metadata if hasattr(m, bound)), None)
        for bound in ("ge", "le", "gt")
    )
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    if above is not None:
        return f" greater than {above}"
    return ""

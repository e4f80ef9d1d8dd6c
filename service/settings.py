"""Service settings, read from ``PE_*`` environment variables by one pydantic-settings class.
Settings are plain values: what they mean to the encodings (``PE_PRELOAD``'s tables) is
parsed where the service starts (``service.preload``)."""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB: Final = 1 << 20
# Positions are int32 position ids: the accuracy promise holds up to here, not past it.
POSITION_CEILING: Final = (1 << 31) - 1
# an origin as browsers send it: scheme://host[:port], nothing after
_ORIGIN: Final = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s,*]+")


class Settings(BaseSettings):
    """Every knob of the service; ``PE_<NAME>`` in the environment sets ``<name>``."""

    model_config = SettingsConfigDict(env_prefix="PE_", frozen=True, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1)
    cache_bytes: int = Field(512 * MiB, ge=0)
    max_elements: int = Field(1 << 26, ge=1)
    max_json_elements: int = Field(1 << 21, ge=1)
    max_body_bytes: int = Field(64 * MiB, ge=1)
    # a model's config.json, posted to the rotary from-config endpoint (they are a few KiB)
    max_config_bytes: int = Field(1 * MiB, ge=1)
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
    min_read_rate: int = Field(256 << 10, gt=0)
    # bytes of answers held for slow clients (a piece untaken for 2 s), all together
    slow_client_bytes: int = Field(128 * MiB, ge=0)
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

    def allowed_origins(self) -> frozenset[str] | None:
        """The origins CORS lets read answers: None for every origin, empty for none."""
        if self.cors_origins == "*":
            return None
        return frozenset(filter(None, self.cors_origins.split(",")))

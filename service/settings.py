"""Service settings, read from ``PE_*`` environment variables by one pydantic-settings class."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.core import DEFAULT_BASE, DTYPES, LAYOUTS, DType, Layout

MiB = 1 << 20
_PRELOAD_ITEM = re.compile(
    r"(?P<max_len>\d+)x(?P<d_model>\d+)(?:@(?P<base>[^:]+))?(?P<rest>(?::\w+)*)"
)


@dataclass(frozen=True)
class Preload:
    """One table named in ``PE_PRELOAD``: ``MAXLENxDMODEL[@BASE][:LAYOUT][:DTYPE]``."""

    max_len: int
    d_model: int
    base: float = DEFAULT_BASE
    layout: Layout = "interleaved"
    dtype: DType = "float32"


def parse_preload(text: str) -> list[Preload]:
    """Parse ``512x512,2048x1024@10000:split:float64`` into table specifications."""
    tables = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = _PRELOAD_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"{item!r} is not MAXLENxDMODEL[@BASE][:LAYOUT][:DTYPE]")
        base = float(match["base"]) if match["base"] else DEFAULT_BASE
        if not base > 1 or base == float("inf"):
            raise ValueError(f"{item!r}: base must be a finite number greater than 1")
        layout: Layout = "interleaved"
        dtype: DType = "float32"
        for word in filter(None, match["rest"].split(":")):
            if word in LAYOUTS:
                layout = word
            elif word in DTYPES:
                dtype = word
            else:
                raise ValueError(f"{item!r}: {word!r} is neither a layout nor a dtype")
        max_len, d_model = int(match["max_len"]), int(match["d_model"])
        if max_len < 1 or d_model < 1:
            raise ValueError(f"{item!r}: max_len and d_model must be positive")
        tables.append(Preload(max_len, d_model, base, layout, dtype))
    return tables


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
    preload: str = ""
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["text", "json"] = "text"
    shutdown_timeout: int = Field(30, ge=0)
    send_timeout: float = Field(30.0, gt=0)
    max_image_width: int = Field(2048, ge=320)
    max_image_height: int = Field(2048, ge=240)

    @field_validator("preload")
    @classmethod
    def _valid_preload(cls, value: str) -> str:
        parse_preload(value)
        return value

    @model_validator(mode="after")
    def _preload_within_limits(self) -> Settings:
        for table in self.preload_tables:
            if table.max_len * table.d_model > self.max_elements:
                raise ValueError(
                    f"preload {table.max_len}x{table.d_model} is over PE_MAX_ELEMENTS "
                    f"({self.max_elements})"
                )
        return self

    @property
    def preload_tables(self) -> list[Preload]:
        return parse_preload(self.preload)

"""The rotary parameters with M-RoPE's (``mrope_section``, ``mrope_interleaved``) and an
engine's (:mod:`service.schemas.engines`): the ``GET``, from-config, ``POST .../positions``
and apply of the rotary family take these. The
table by rows is the plain one; rows at three-axis position ids turn each pair by its axis
(:mod:`service.encodings.mrope`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, Field

from service.encodings import mrope
from service.encodings.registry import DType
from service.encodings.rotary import RotaryKey
from service.errors import InvalidParameter
from service.schemas.common import RawBodyFields
from service.schemas.engines import EngineFields
from service.schemas.rotary import RotaryApplyQuery, RotaryTableQuery


class MropeFields(BaseModel):
    """Which pairs each axis of three-axis position ids turns."""

    mrope_section: str | None = Field(
        None,
        max_length=64,
        description="M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the pairs the temporal, height "
        "and width axes of posted position ids turn, comma-separated (16,24,24 for "
        "head_dim 128); they sum to rotary_dim / 2. The table by rows is the plain one.",
    )
    mrope_interleaved: bool = Field(
        False, description="Qwen3-VL's layout: the axes' pairs interleaved (T H W T H W ... T)."
    )

    def sections(self) -> tuple[int, ...]:
        if self.mrope_section is None:
            if self.mrope_interleaved:
                raise InvalidParameter("mrope_interleaved", "is for M-RoPE: give mrope_section")
            return ()
        try:
            return tuple(int(part) for part in self.mrope_section.split(","))
        except ValueError:
            raise InvalidParameter(
                "mrope_section", "must be three integers, comma-separated"
            ) from None

    def sectioned(self, key: RotaryKey) -> RotaryKey:
        """``key`` with the sections, checked against its pairs."""
        sections = self.sections()
        if not sections:
            return key
        mrope.check(sections, key.pairs)
        return dataclasses.replace(
            key, mrope_section=sections, mrope_interleaved=self.mrope_interleaved
        )


class RopeQuery(MropeFields, EngineFields, RotaryTableQuery):
    """Which rotary table (and, for position ids of three axes, which pairs each turns)."""

    def key(self) -> RotaryKey:
        return self.sectioned(super().key())

    def describe(self, key: RotaryKey) -> dict[str, Any]:
        """The table's fields; M-RoPE's where given."""
        fields = super().describe(key) | self.engine_fields()
        if key.mrope_section:
            fields |= {
                "mrope_section": list(key.mrope_section),
                "mrope_interleaved": key.mrope_interleaved,
            }
        return fields


class RopeApplyQuery(MropeFields, RawBodyFields, EngineFields, RotaryApplyQuery):
    """How to rotate a posted batch (a raw body's shape and dtype too); with M-RoPE,
    position_ids of three axes ``(3, L)`` or ``(3, B, L)``."""

    def key(self, head_dim: int, dtype: DType) -> RotaryKey:
        return self.sectioned(super().key(head_dim, dtype))

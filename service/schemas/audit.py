"""The query of ``GET /v1/audit/{family}``: the family's table parameters (but the rows,
columns, dtype, rounding and format of an answer, which the audit chooses), and what to
audit: the paths, the bands, JSON or PNG."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from service.errors import InvalidParameter
from service.schemas.common import Aliased

# the table's parameters an audit does not take: it measures every entry, in float64
DROPPED: Final = frozenset(
    {"start", "stop", "dim_start", "dim_stop", "dtype", "rounding", "format"}
)
MAX_EDGES: Final = 64


class AuditFields(Aliased):
    """What an audit measures, and how it answers (and the other names of the table's
    parameters that the table's query takes: rotary's ``rope_theta``, ``rope_type``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: str | None = Field(
        None,
        max_length=512,
        description="The computation paths, comma-separated (default every one that applies)",
    )
    bands: str | None = Field(
        None,
        max_length=1024,
        description=f"Band edges, comma-separated positions (at most {MAX_EDGES}); default "
        "powers of two.",
    )
    format: Literal["json", "png"] | None = Field(
        None, description="json (default), or png: error against position, log-log."
    )


def audit_query(table: type[BaseModel], name: str, paths: Sequence[str]) -> type[AuditFields]:
    """``table``'s parameters but :data:`DROPPED`, and their other names, with
    :class:`AuditFields` (``paths``: the family's, named in their description)."""
    fields: dict[str, Any] = {
        field: (info.annotation, info)
        for field, info in table.model_fields.items()
        if field not in DROPPED
    }
    chosen = AuditFields.model_fields["paths"]
    description = f"{chosen.description}: {', '.join(paths)}."
    fields["paths"] = (
        chosen.annotation,
        FieldInfo.merge_field_infos(chosen, description=description),
    )
    query = create_model(name, __base__=AuditFields, **fields)
    aliases = getattr(table, "ALIASES", {})
    query.ALIASES = {alias: field for alias, field in aliases.items() if field in fields}
    return query


def chosen(text: str | None, known: list[str]) -> list[str]:
    """The paths asked for, in the order given, each once; every one that applies when none."""
    if text is None:
        return known
    asked = list(dict.fromkeys(part.strip() for part in text.split(",")))
    unknown = [part for part in asked if part not in known]
    if unknown:
        raise InvalidParameter(
            "paths", f"{unknown[0][:40]!r} is not a path of this table ({', '.join(known)})"
        )
    return asked


def edges(text: str | None, max_len: int) -> list[int] | None:
    """The band edges asked for: positions from 1 to max_len - 1."""
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) > MAX_EDGES:
        raise InvalidParameter("bands", f"has more than {MAX_EDGES} edges")
    try:
        values = sorted({int(part) for part in parts})
    except ValueError:
        raise InvalidParameter("bands", "must be positions, comma-separated") from None
    if values[0] < 1 or values[-1] >= max_len:
        raise InvalidParameter("bands", f"edges must be from 1 to max_len - 1 ({max_len - 1})")
    return values

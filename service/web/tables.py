"""A table named in a posted body, for the routes that take tables beside their own fields
(``POST /v1/compare``'s ``a`` and ``b``, ``POST /v1/verify``'s claim): a family and its
``GET`` parameters, or a model's config with from-config's, made into the family's key with
every refusal located in the body (``a.parameters.base``, ``a.config.rope_theta``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from service.encodings.registry import Key
from service.errors import InvalidInput
from service.runtime import Runtime
from service.web.declared import Declared
from service.web.documents import in_table, read_fields

# the comparison's own fields, which a table's parameters must not hold (they were ignored)
RANGE_FIELDS: Final = ("start", "stop", "format")


class Table(BaseModel):
    """One table: a family and its ``GET`` parameters, or a config and from-config's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(description="rotary, sinusoidal or temperature.")
    parameters: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] | None = Field(None, description="A model's config.json.")


class Spec(NamedTuple):
    """A table to compare: its key, and how the picture's title names it."""

    key: Key
    said: str
    parameters: dict[str, Any]


def _query(
    declared: Declared[Any, Any], name: str, table: Table, parameters: dict[str, Any]
) -> Any:
    """The table's query made from ``parameters``, its refusals located in the body: a
    worker's, as parameters as many as a body holds (87,000 unknown ones: 0.5 s) are."""
    with in_table(name, table.parameters, table.config is not None):
        return declared.query.model_validate(parameters)


async def spec_of(
    runtime: Runtime,
    known: Mapping[str, Declared[Any, Any]],
    table: Table,
    name: str,
    stop: int,
    size: int,
    range_name: str = "stop",
    request: str = "the comparison's, not a table's: start and stop go beside a and b",
) -> Spec:
    """The key ``table`` names, and its parameters said shortly; its refusals located in
    the body (``a.parameters.base``, ``a.config.rope_theta``). A config (its share of the
    body's ``size`` bytes) is read in the lane that size takes."""
    declared = known.get(table.family)
    if declared is None:
        raise InvalidInput(f"{name}.family", f"must be one of {', '.join(known)}")
    misplaced = [field for field in RANGE_FIELDS if field in table.parameters]
    if misplaced:
        raise InvalidInput(
            f"{name}.parameters.{misplaced[0]}",
            f"is {request}, format in the query",
        )
    parameters = dict(table.parameters)
    if table.config is not None:
        spec = declared.from_document
        if spec is None:
            raise InvalidInput(f"{name}.config", f"{table.family} tables are not read from configs")
        with in_table(name, parameters, table.config is not None):
            # those from-config takes checked as it checks them (head_dim_key a string)
            reading = {
                key: value for key, value in parameters.items() if key in spec.query.model_fields
            }
            checked = spec.query.model_validate(reading).model_dump(exclude_unset=True)
            asked = {**parameters, **checked}
            read = await read_fields(runtime, spec, table.config, asked, size)
        several = spec.several(read)
        if several is not None:
            raise InvalidInput(f"{name}.parameters.layer_type", f"{several}: name one")
        with in_table(name, table.parameters, True):
            # the range compared is the table's length where neither says one
            parameters = spec.parameters(read, parameters, under={"max_len": stop})
    if "max_len" in declared.query.model_fields:  # not a grid's, whose rows its grid says
        parameters.setdefault("max_len", stop)
    query = await runtime.compute(len(parameters), _query, declared, name, table, parameters)
    with in_table(name, table.parameters, table.config is not None):
        key: Key = await declared.key_of(runtime, query)
    rows = declared.block(query, key).max_len
    if stop > rows:
        raise InvalidInput(range_name, f"is past the {rows} rows of {name}'s table")
    given = query.model_dump(exclude_unset=True)
    parameters = dict(given)
    if given.get("max_len") == stop:
        del given["max_len"]  # the range compared says it
    # what each table must say first (its width), then the rest
    fields = declared.query.model_fields
    required = {each for each, field in fields.items() if field.is_required()}
    shown = sorted(given, key=lambda field: field not in required)
    said = " ".join(f"{field}={_shown(given[field])}" for field in shown)
    return Spec(key, f"{table.family} {said}".strip(), parameters)


def _shown(value: Any) -> str:
    """A parameter's value as a title says it: ``10000`` for ``10000.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)

"""The preset seam: presets and their parameters are declared once, in the catalogue and
``encodings/parameters.py``, and the wire is made from them: the preset names, the query
fields with their ranges and descriptions, the JSON table's fields, ``GET /v1/presets``. A
new preset with a new parameter is one catalogue entry (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import typing
from dataclasses import replace
from typing import Any

import pytest

from service.encodings import parameters
from service.encodings.catalogue import PARAMETERS, PRESETS, taking
from service.schemas.presets import PRESET_PARAMETERS, PresetFields, PresetName
from service.schemas.sinusoidal import TableDocument
from service.settings import POSITION_CEILING
from tests.support import ROOT


def test_each_parameter_is_declared_once() -> None:
    """A preset may word a parameter its own way and give its own default; its type, range
    and query field are the declaration's."""
    for preset in PRESETS.values():
        for param in preset.params:
            declared = PARAMETERS[param.name]
            own = replace(declared, default=param.default, description=param.description)
            assert param == own, (preset.name, param.name)


def test_the_position_ceiling_is_declared_once() -> None:
    """One declaration, below pydantic (service/arrays.py): the settings, the wire models and
    the presets' parameters import it."""
    declared = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "service").rglob("*.py"))
        if re.search(r"^POSITION_CEILING\b[^=]*=", path.read_text(), re.MULTILINE)
    ]
    assert declared == ["service/arrays.py"]
    assert parameters.START_INDEX.le == POSITION_CEILING


def test_the_wire_is_made_from_the_catalogue() -> None:
    assert typing.get_args(PresetName) == tuple(PRESETS)
    queried = [name for name, param in PARAMETERS.items() if param.query is not None]
    assert list(PRESET_PARAMETERS) == queried
    fields = PresetFields.model_fields
    assert list(fields) == ["preset", "rounding", *queried]
    for name in queried:
        param, field = PARAMETERS[name], fields[name]
        assert field.annotation == (param.kind | None)
        assert field.default is None
        assert field.description == f"{', '.join(taking(name))}: {param.query}"
        rules = {
            rule: getattr(meta, rule)
            for meta in field.metadata
            for rule in ("ge", "gt", "le")
            if getattr(meta, rule, None) is not None
        }
        declared = {"ge": param.ge, "gt": param.gt, "le": param.le}
        assert rules == {rule: bound for rule, bound in declared.items() if bound is not None}
    document = list(TableDocument.model_fields)
    at = document.index("base")
    assert document[at : at + len(PARAMETERS)] == list(PARAMETERS)


# Run in a fresh interpreter: the wire models are made when their modules are imported.
NEW_PRESET = """
    import json
    from dataclasses import replace

    from service.encodings import catalogue
    from service.encodings.presets import Param

    offset = Param("demo_offset", int, 3, "Rows skipped.", "rows skipped; default 3.", ge=1, le=9)
    keras = catalogue.PRESETS["keras"]
    catalogue.PRESETS["demo"] = replace(keras, name="demo", params=(*keras.params, offset))
    catalogue.PARAMETERS.update(catalogue.parameters_of(catalogue.PRESETS.values()))

    from service.app import create_app
    from service.settings import Settings
    from tests.support import in_process

    with in_process(create_app(Settings()), raise_errors=False) as http:
        spec = http.get("/openapi.json").json()
        listed = http.get("/v1/presets").json()["presets"]
        refusals = [
            http.get("/v1/encodings/sinusoidal?max_len=2&d_model=8&" + query).json()["detail"]
            for query in ("preset=demo&demo_offset=0", "preset=keras&demo_offset=2")
        ]
    table = spec["paths"]["/v1/encodings/sinusoidal"]["get"]
    print(json.dumps({
        "query": {p["name"]: p for p in table["parameters"]},
        "document": spec["components"]["schemas"]["TableDocument"]["properties"],
        "listed": listed[-1],
        "refusals": refusals,
    }))
"""


@pytest.mark.slow  # a fresh interpreter, for a catalogue of its own: the full run's
def test_a_new_preset_is_one_catalogue_entry() -> None:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NEW_PRESET)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    made: dict[str, Any] = json.loads(out.stdout)
    query = made["query"]
    assert query["preset"]["schema"]["enum"][-1] == "demo"
    offset = query["demo_offset"]
    assert offset["description"] == "demo: rows skipped; default 3."
    assert offset["schema"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 9}
    assert query["start_index"]["description"].startswith("tensor2tensor, keras, demo: ")
    assert made["document"]["demo_offset"]["anyOf"][0] == {"type": "integer"}
    assert made["listed"]["name"] == "demo"
    assert made["listed"]["parameters"][-1] == {
        "name": "demo_offset",
        "default": 3,
        "description": "Rows skipped.",
        "minimum": 1.0,
        "exclusive_minimum": None,
        "maximum": 9.0,
    }
    below, elsewhere = made["refusals"]
    assert "greater than or equal to 1" in below
    assert "does not apply to preset keras" in elsewhere

"""A Hugging Face model's ``config.json`` as posted (:func:`read_config`: a JSON object,
bounded, no key given twice) and as read (:class:`Reader`: each field's type checked, the
path of each field read recorded, a config class's names and defaults applied)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from service.codecs.json import unreadable
from service.errors import InvalidInput, MalformedBody
from service.text import shown

if TYPE_CHECKING:
    from service.schemas.hf_models import ModelType

KINDS: Final = {"rope_type", "type"}
# names a problem lists from a config before "and N more": a config may hold any number
_FEW: Final = 3


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class FieldType:
    """What a field holds in transformers' configs, and how a problem says it."""

    accepts: Callable[[Any], bool]
    said: str


NUMBER: Final = FieldType(_is_number, "a number")
INTEGER: Final = FieldType(lambda v: _is_number(v) and isinstance(v, int), "an integer")
BOOLEAN: Final = FieldType(lambda v: isinstance(v, bool), "true or false")
NUMBERS: Final = FieldType(
    lambda v: isinstance(v, list) and all(map(_is_number, v)), "a list of numbers"
)
STRING: Final = FieldType(lambda v: isinstance(v, str), "a string")

# every field a reader declares it reads (:func:`fields`), by name; any other is a number
_TYPES: Final[dict[str, FieldType]] = {}


def fields(declared: Mapping[str, FieldType]) -> Mapping[str, FieldType]:
    """Declare the fields a reader reads (by the common name: ``hidden_size``, not GPT-J's
    ``n_embd``) and the type each holds. A field holds one type whichever reader reads it
    (the rotary tables' reading and the temperature's both read ``num_hidden_layers``): a
    second type is refused here, when the reader's module is imported."""
    for name, kind in declared.items():
        if _TYPES.setdefault(name, kind) is not kind:
            raise ValueError(f"{name} is declared {_TYPES[name].said} and {kind.said}")
    return declared


def _typed(where: str, name: str, value: Any) -> Any:
    """``value`` if it has the type the field ``name`` takes in transformers' configs (as
    its readers declare it, else a number), else an :class:`InvalidInput` naming ``where``:
    no strings read as numbers, no booleans as numbers."""
    kind = _TYPES.get(name, NUMBER)
    if not kind.accepts(value):
        raise InvalidInput(where, f"must be {kind.said}, not {type(value).__name__}")
    return value


class Reader:
    """A config's object as read: each field's type checked (:func:`_typed`), and the path
    of each field read (``text_config.rope_parameters.rope_theta``) kept once, in order, in
    ``read``, shared with the readers of the objects inside it (``seen`` beside it keeps
    each record one set look-up: a config may name thousands of fields).

    ``known`` is the object's model type (:mod:`service.schemas.hf_models`), its config class:
    a field it renames is read under the config's own name (GPT-J's ``n_embd`` for
    ``hidden_size``), and a field the config leaves out takes the class's default, recorded
    as ``PATH=VALUE``."""

    def __init__(
        self,
        values: Mapping[str, Any],
        path: str = "",
        read: list[str] | None = None,
        seen: set[str] | None = None,
        known: ModelType | None = None,
    ):
        self.values, self.path, self.known = values, path, known
        self.read: list[str] = [] if read is None else read
        self.seen: set[str] = set(self.read) if seen is None else seen

    def record(self, path: str) -> None:
        """``path`` among the fields read, once."""
        if path not in self.seen:
            self.seen.add(path)
            self.read.append(path)

    def get(self, name: str) -> Any:
        """The field ``name`` (under the class's own name for it, where it has one, as its
        ``attribute_map`` reads either), type-checked; else the class's default; else None.
        A null is the field left out, but where the class refuses it (``ModelType.unset``)."""
        own = name if self.known is None else self.known.names.get(name, name)
        spelled, value = own, self.values.get(own)
        if value is None and own in self.values and self.known is not None:
            why = self.known.unset.get(own)
            if why is not None:
                raise InvalidInput(self.path + own, f"is null: {why}")
        if value is None and own != name:
            spelled, value = name, self.values.get(name)
        if value is not None:
            where = self.path + spelled
            self.record(where)
            return _typed(where, name, value)
        value = None if self.known is None else self.known.defaults.get(own)
        if value is not None:
            self.record(f"{self.path}{own}={value}")
        return value

    def get_or(self, name: str, default: Any) -> Any:
        """:meth:`get`, else ``default``, recorded as the value taken (``PATH=VALUE``)."""
        value = self.get(name)
        if value is None:
            self.record(f"{self.path}{name}={default}")
            return default
        return value

    def object(self, name: str) -> Reader | None:
        """The object ``name`` holds, or None; anything else there is refused."""
        value = self.values.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidInput(self.path + name, "must be an object")
        return Reader(value, f"{self.path}{name}.", self.read, self.seen)

    def within(self, values: Mapping[str, Any], name: str) -> Reader:
        """A reader of ``values``, which the config holds at ``name`` (or which stand for it)."""
        return Reader(values, f"{self.path}{name}.", self.read, self.seen)

    def of_class(self, known: ModelType | None) -> Reader:
        """This object read as an instance of the config class ``known``."""
        return Reader(self.values, self.path, self.read, self.seen, known)


def model_type(top: Reader, text: Reader) -> str | None:
    """The text model's ``model_type``, else the config's: a string (transformers looks
    its config class up by it), else an :class:`InvalidInput` naming it, before anything
    looks it up."""
    for reader in (text, top):
        value = reader.values.get("model_type")
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{reader.path}model_type", f"must be a string, not {_kind(value)}")
        if value:
            return value
    return None


def _kind(value: Any) -> str:
    """How a problem names the JSON type of ``value``."""
    if isinstance(value, bool):
        return "true or false"
    names: dict[type, str] = {list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def listed(names: list[str]) -> str:
    """The first few of a config's ``names``, each cut short, to quote in a message."""
    listed = ", ".join(shown(name) for name in names[:_FEW])
    more = len(names) - _FEW
    return f"{listed} and {more:,} more" if more > 0 else listed


# A config's lists and objects, counted before it is parsed: a config.json has a few dozen;
# 1 MiB of nested empty lists is half a million for orjson to build.
MAX_CONTAINERS: Final = 4096


def read_config(body: bytes | bytearray, what: str = "the config") -> dict[str, Any]:
    """A posted ``config.json``: a JSON object, no key given twice in any of its objects."""
    containers = body.count(b"[") + body.count(b"{")
    if containers > MAX_CONTAINERS:
        raise MalformedBody(
            f"{what} holds {containers:,} lists and objects (counting brackets in strings); "
            f"at most {MAX_CONTAINERS:,} are read, a config.json has a few dozen"
        )
    try:
        config = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise unreadable(exc, body, what) from None
    if not isinstance(config, dict):
        raise InvalidInput("body", f"{what} must be a JSON object")
    _refuse_repeated_keys(body, what)
    return config


class _Repeated(Exception):
    """A key that appears twice in one object of the config."""


def _unique(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Repeated(key)
        seen.add(key)


def _refuse_repeated_keys(body: bytes | bytearray, what: str) -> None:
    """Refuse a config that gives a key twice in any of its objects, as an apply body is
    refused: orjson keeps the last silently (``rope_type`` twice would choose a scaling
    unseen), and only the standard library reports each object's keys. A config is small
    (PE_MAX_CONFIG_BYTES), so it is read a second time; nothing is built from it."""
    try:
        json.loads(body, object_pairs_hook=_unique)
    except _Repeated as exc:
        raise InvalidInput(shown(str(exc.args[0])), f"appears more than once in {what}") from None
    except RecursionError:  # orjson reads 1024 levels, the standard library fewer
        raise MalformedBody(f"{what} is nested too deeply to be read") from None
    except ValueError as exc:  # none known: the two parsers read the same JSON otherwise
        raise MalformedBody(f"{what} is not JSON: {shown(str(exc))}") from None

"""The Python literals an ``.npy`` header holds (a dict of strings, booleans, numbers, and
tuples or lists of them), parsed as ``ast.literal_eval`` parses them, without the ast module.

Hand-written because CPython 3.11 keeps the AST constructor's recursion depth per
interpreter, not per thread: headers parsed at once in worker threads failed now and then
with "SystemError: AST constructor recursion depth mismatch" (a 500; python/cpython#106905),
and a lock around ``literal_eval`` makes the threads that decode bodies queue behind each
other's switch intervals. It reads less than ``literal_eval`` (no sets, bytes, complex or
hexadecimal numbers, no implicit concatenation), never more, and at most ``depth`` levels of
brackets; the caller bounds the text's length.
"""

from __future__ import annotations

import re
from typing import Final

Literal = (
    str
    | int
    | float
    | bool
    | None
    | tuple["Literal", ...]
    | list["Literal"]
    | dict["Literal", "Literal"]
)

_TOKEN: Final = re.compile(
    r"""[ \t\n\r\f\v]*(?:
    (?P<text>'[^'\\\n]*'|"[^"\\\n]*")
    |(?P<number>[+-]?(?:\d+\.\d*|\.\d+|0|[1-9]\d*)(?:[eE][+-]?\d+)?)(?![\w.])
    |(?P<name>True|False|None)(?![\w])
    |(?P<mark>[{}()\[\]:,])
    )""",
    re.VERBOSE | re.ASCII,
)
_NAMES: Final[dict[str, Literal]] = {"True": True, "False": False, "None": None}
_CLOSING: Final = {"(": ")", "[": "]", "{": "}"}


class NotALiteral(ValueError):
    """The text is not one of the literals above."""


def parse(text: str, depth: int) -> Literal:
    """The literal ``text`` holds (surrounding white space allowed), nested at most
    ``depth`` brackets deep."""
    tokens = _tokens(text)
    value, at = _value(tokens, 0, depth)
    if at != len(tokens):
        raise NotALiteral("text after the literal")
    return value


def _tokens(text: str) -> list[tuple[str, str]]:
    found, at = [], 0
    stripped = text.rstrip(" \t\n\r\f\v")
    while at < len(stripped):
        match = _TOKEN.match(stripped, at)
        if match is None or match.end() == at:
            raise NotALiteral(f"unexpected text at {at}")
        kind = match.lastgroup
        assert kind is not None
        found.append((kind, match.group(kind)))
        at = match.end()
    return found


def _value(tokens: list[tuple[str, str]], at: int, depth: int) -> tuple[Literal, int]:
    if at >= len(tokens):
        raise NotALiteral("the text ends early")
    kind, token = tokens[at]
    if kind == "text":
        return token[1:-1], at + 1
    if kind == "number":
        try:
            return (int(token) if token.lstrip("+-").isdigit() else float(token)), at + 1
        except ValueError:  # past Python's 4,300 digits, as literal_eval refuses it
            raise NotALiteral("a number too long") from None
    if kind == "name":
        return _NAMES[token], at + 1
    if token not in _CLOSING:
        raise NotALiteral(f"unexpected {token!r}")
    if depth < 1:
        raise NotALiteral("nested too deeply")
    return _container(tokens, at + 1, token, depth - 1)


def _container(
    tokens: list[tuple[str, str]], at: int, opening: str, depth: int
) -> tuple[Literal, int]:
    """A dict, tuple or list whose opening mark is just before ``at``."""
    closing = _CLOSING[opening]
    items: list[Literal] = []
    pairs: dict[Literal, Literal] = {}
    commas = 0
    while True:
        if at >= len(tokens):
            raise NotALiteral("the text ends early")
        if tokens[at] == ("mark", closing):
            at += 1
            break
        item, at = _value(tokens, at, depth)
        if opening == "{":
            if tokens[at : at + 1] != [("mark", ":")]:
                raise NotALiteral("a dict's key without its value")
            value, at = _value(tokens, at + 1, depth)
            try:
                pairs[item] = value
            except TypeError:  # an unhashable key, as literal_eval refuses it
                raise NotALiteral("a key that cannot be a dict's") from None
        else:
            items.append(item)
        if tokens[at : at + 1] == [("mark", ",")]:
            at, commas = at + 1, commas + 1
        elif tokens[at : at + 1] != [("mark", closing)]:
            raise NotALiteral(f"expected ',' or {closing!r}")
    if opening == "{":
        return pairs, at
    if opening == "[":
        return items, at
    if len(items) == 1 and not commas:
        return items[0], at  # (3) is 3, as in Python
    return tuple(items), at

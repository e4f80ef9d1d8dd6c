"""``python -m service verify|identify``: a table file checked without a server.

The file is posted to ``POST /v1/verify`` (or ``/v1/identify``) of the app in this process
(:mod:`service.server.inprocess`, as ``export`` asks it), so that the answer is the HTTP
answer, with the same parameters, limits and refusals, but for the body's size: the file is
the user's own, so the posted-body limits are raised to its length. A claim made of a
``config.json`` is first read by the family's from-config (its ``Content-Location`` is the
``GET`` it names, asked with ``If-None-Match: *``, so nothing is computed), and that
``GET``'s parameters are the claim: the table itself is posted in its own format, not as
JSON.

Exit status: 0 for a match (bitwise, within the library's rounding or a named dtype's), 1
for a difference (identify: no candidate matches), 2 for a command line, file or claim the
service cannot take (its detail on standard error).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from service.codecs.types import BodyFormat
from service.settings import Settings

EXIT_MATCH: Final = 0
EXIT_DIFFERENT: Final = 1
EXIT_USAGE: Final = 2
# the from-config GET's fields that are not the claim's: the verify route's own, or the
# range, which it takes from the rows posted
_NOT_CLAIMED: Final = ("max_len", "start", "stop", "format", "dtype")
# how many of the bands, and of identify's candidates, the summary shows
_SHOWN: Final = 3
_SUFFIXES: Final[dict[str, BodyFormat]] = {
    ".npy": "npy",
    ".npz": "npz",
    ".safetensors": "safetensors",
    ".json": "json",
}


class Refused(Exception):
    """What the command cannot take: a bad argument, an unreadable file, the service's
    refusal (its detail)."""


def parameters_of(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` items as a mapping, each name once."""
    given: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name or name in given:
            why = "is given twice" if name in given else "is not NAME=VALUE"
            raise Refused(f"--param {item!r} {why}")
        given[name] = value
    return given


def format_of(path: Path | None, body: bytes) -> BodyFormat:
    """The table file's format: its suffix's, else what its first bytes say."""
    if path is not None and path.suffix.lower() in _SUFFIXES:
        return _SUFFIXES[path.suffix.lower()]
    if body.startswith(b"\x93NUMPY"):
        return "npy"
    if body.startswith(b"PK"):
        return "npz"
    if body.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "safetensors"


def read(path: Path) -> bytes:
    """The file's bytes (``-``: standard input's)."""
    try:
        return sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror or exc}") from None


def _quiet(settings: Settings, size: int) -> Settings:
    """The settings for one answer in this process: no port, nothing preloaded or kept, and
    a body as large as the file."""
    return settings.model_copy(
        update={
            "grpc_port": 0,
            "preload": "",
            "cache_bytes": 0,
            "max_body_bytes": max(settings.max_body_bytes, size),
            "posted_bytes": max(settings.posted_bytes, size),
        }
    )


def ask(
    settings: Settings,
    route: str,
    body: bytes,
    fmt: BodyFormat,
    query: Mapping[str, str],
    config: tuple[str, bytes] | None = None,
) -> dict[str, Any]:
    """The app's JSON answer to ``POST route?query`` with the table ``body`` (in ``fmt``);
    with ``config`` (a family's from-config path and the config's bytes), the claim is the
    ``GET`` that from-config names, beside ``query``'s own. :class:`Refused` with the
    problem's detail where the app refuses."""
    work = _ask(_quiet(settings, len(body)), route, body, fmt, query, config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a notebook's loop runs here
        return pool.submit(asyncio.run, work).result()


async def _ask(
    settings: Settings,
    route: str,
    body: bytes,
    fmt: BodyFormat,
    query: Mapping[str, str],
    config: tuple[str, bytes] | None,
) -> dict[str, Any]:
    from service.app import create_app
    from service.codecs.types import MEDIA_TYPES
    from service.server import inprocess

    app = create_app(settings)
    asked = dict(query)
    async with app.router.lifespan_context(app):
        if config is not None:
            asked = {**await _claimed(app, config, asked), **asked}
        out = io.BytesIO()
        fields = {"content-type": MEDIA_TYPES[fmt]}
        status, _, refusal = await inprocess.request(
            app, "POST", route, asked, body, out.write, fields
        )
    if status != 200:
        raise Refused(_detail(status, refusal))
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


async def _claimed(app: Any, config: tuple[str, bytes], query: dict[str, str]) -> dict[str, str]:
    """The claim's family and ``GET`` parameters, as from-config reads the config with
    ``query``'s parameters (which it takes out of ``query``, but for a ``max_len``)."""
    from service.server import inprocess

    path, document = config
    family = query.pop("family")
    # the claim's range is the rows posted: one row asked of from-config, which reads the
    # parameters (a layer type's too) and computes nothing (the 304)
    reading = {"max_len": "1"} | {name: value for name, value in query.items() if name != "start"}
    for name in reading:
        if name != "max_len":
            query.pop(name, None)
    status, headers, refusal = await inprocess.request(
        app,
        "POST",
        path,
        {**reading, "format": "npz"},  # npz holds a config's tables of every layer type
        document,
        lambda _: None,
        {"if-none-match": "*"},
    )
    if status not in (200, 304):
        raise Refused(_detail(status, refusal))
    location = headers.get("content-location")
    if location is None:
        named_layers = (each.strip() for each in headers.get("x-layer-types", "").split(","))
        layers = ", ".join(dict.fromkeys(each for each in named_layers if each))
        raise Refused(
            f"the config names a table per kind of layer ({layers}): name one with "
            "--param layer_type=..."
            if layers
            else "the config's table has no GET that short: give --family and --param"
        )
    named = urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query)
    return {"family": family} | {k: v for k, v in named if k not in _NOT_CLAIMED}


def _detail(status: int, refusal: bytes) -> str:
    try:
        document = json.loads(refusal)
    except ValueError:
        document = None
    if isinstance(document, dict) and "detail" in document:
        return f"{status}: {document['detail']}"
    return f"{status}: {refusal.decode(errors='replace')}"


def get_of(family: str, parameters: Mapping[str, Any], paths: Mapping[str, str]) -> str:
    """The ``GET`` that reproduces a table: its path and query."""
    query = urllib.parse.urlencode(
        {name: _said(value) for name, value in parameters.items()}, safe=","
    )
    path = paths.get(family, f"/v1/encodings/{family}")
    return f"{path}?{query}" if query else path


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(_said(each) for each in value)
    return str(value)


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def _crossings(first_over: Mapping[str, Any]) -> str:
    return ", ".join(
        f"past {threshold} at position {_number(at)}"
        if at is not None
        else f"never past {threshold}"
        for threshold, at in first_over.items()
    )


def _bands(bands: Sequence[Mapping[str, Any]]) -> list[str]:
    worst = sorted(bands, key=lambda band: -(band.get("max_difference") or 0.0))[:_SHOWN]
    return [
        f"  positions {band['start']}..{band['stop'] - 1}: largest difference "
        f"{_number(band['max_difference'])}, mean {_number(band['mean_difference'])}"
        for band in worst
    ]


def verified(answer: Mapping[str, Any], paths: Mapping[str, str]) -> str:
    """The verify answer, said for a terminal."""
    claim = answer["claim"]
    lines = [
        f"match: {answer['match']}",
        f"claim: GET {get_of(claim['family'], claim['parameters'], paths)}",
        f"rows: {answer['rows']}",
    ]
    if answer.get("shape"):
        shape = answer["shape"]
        lines.append(
            f"width: the table's {shape['posted_width']}, the claim's {shape['claimed_width']}"
        )
    if answer["bands"]:
        lines += ["bands with the largest difference:", *_bands(answer["bands"])]
    if answer["first_over"]:
        lines.append(f"first over: {_crossings(answer['first_over'])}")
    wrong_way = answer.get("first_wrong_way")
    if wrong_way is not None:
        lines.append(f"first pair pointing the wrong way: {wrong_way}")
    if answer.get("non_finite"):
        nan = answer["non_finite"]
        lines.append(f"non-finite entries: {nan['entries']} (rows {nan['first_positions']})")
    diagnoses = answer.get("diagnoses") or []
    if diagnoses:
        lines.append("diagnoses:")
    for each in diagnoses:
        lines += [
            f"  {each['mistake']} (from position {_number(each['from_position'])}, error "
            f"left {_number(each['max_error'])}): {each['description']}",
            f"    reproduced by GET {get_of(each['family'], each['parameters'], paths)}",
        ]
    if answer["match"] == "different" and not diagnoses:
        lines.append("diagnoses: none of the known mistakes explains the difference")
    return "\n".join(lines) + "\n"


def identified(answer: Mapping[str, Any], paths: Mapping[str, str]) -> str:
    """The identify answer, said for a terminal."""
    read_ = answer.get("read") or {}
    lines = [
        f"matched: {'yes' if answer['matched'] else 'no'} ({answer['tried']} candidates tried)",
        "read from the table: "
        + ", ".join(f"{name} {_number(value)}" for name, value in read_.items()),
    ]
    candidates = answer["candidates"]
    if candidates:
        lines.append("candidates, best first:" if answer["matched"] else "nearest candidates:")
    for each in candidates[:_SHOWN]:
        lines += [
            f"  {each['match']}, largest difference {_number(each['max_error'])}: "
            f"GET {get_of(each['family'], each['parameters'], paths)}",
        ]
        if each["match"] == "different" and each.get("first_over"):
            lines.append(f"    {_crossings(each['first_over'])}")
    return "\n".join(lines) + "\n"

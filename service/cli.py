"""The command line: ``python -m service [serve|openapi|export|verify|identify]`` (and
``pe-service``).

``export`` writes any family's table without a server: the request is answered by the app
in this process (no port is opened), so the file is byte for byte the HTTP answer, with the
same parameters, defaults, limits and refusals. :func:`export` does it from Python.
``verify`` and ``identify`` check a table file the same way (:mod:`service.checking`).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import io
import json
import os
import secrets
import stat
import sys
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final

from service import checking, exporting
from service.codecs.types import FORMATS
from service.exporting import ExportError as ExportError  # public here too: cli.export raises it
from service.settings import Settings, from_environment

AUDIT_FORMATS: Final = ("json", "png")
_DESCRIPTION: Final = """\
Positional encodings of transformer models: computed, cached and served over HTTP.

Settings are PE_* environment variables (docs/settings.md); `serve` reads them."""
_EXPORT: Final = """\
Write a family's table to a file (or standard output) without a server: the answer the
service would give to GET /v1/encodings/FAMILY?NAME=VALUE&... (or, with --config, to
POST .../from-config with that config.json), byte for byte; with --audit, the precision
audit of that table (GET /v1/audit/FAMILY: json, or png).

examples:
  python -m service export sinusoidal max_len=512 d_model=512 -o pe.npy
  python -m service export rotary max_len=8192 head_dim=128 base=500000 --format npz -o rope.npz
  python -m service export rotary --config config.json --format safetensors -o rope.safetensors
  python -m service export alibi num_heads=4 max_len=64 --format json
  python -m service export rotary --config config.json --audit -o audit.json"""
_CHECK: Final = """\
{what}, without a server:
the answer POST /v1/{command} gives for the file's bytes (.npy, .npz or safetensors with
cos and sin or data and optionally position_ids, or JSON).
Exit status: 0 for a match (bitwise, within the library's rounding, or a named dtype's),
1 for {different},
2 for arguments, a file or a claim it cannot take.

examples:
{examples}"""
_VERIFY: Final = _CHECK.format(
    what="Check a table against a family's GET or a model's config.json",
    command="verify",
    different="a difference (diagnosed where a known mistake explains it)",
    examples="""\
  python -m service verify table.npz --config config.json
  python -m service verify table.npy --family rotary --param head_dim=128 --param base=500000
  python -m service verify table.npz --family sinusoidal --param d_model=512 --json""",
)
_IDENTIFY: Final = _CHECK.format(
    what="Name the GETs that reproduce a table, with no claim",
    command="identify",
    different="no candidate that matches",
    examples="""\
  python -m service identify table.npy
  python -m service identify table.npz --start 4096 --json""",
)


def _paths() -> dict[str, str]:
    """Each family's name and the path of its table."""
    from service.routes import FAMILIES

    return {declared.family.name: declared.resource for declared in FAMILIES}


def export(
    family: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    fmt: str | None = None,
    config: Mapping[str, Any] | bytes | None = None,
    settings: Settings | None = None,
    audit: bool = False,
) -> bytes:
    """The bytes of ``family``'s table in ``fmt`` (default npy; or ``parameters``'
    ``format``), as ``GET`` with ``parameters`` (or ``POST .../from-config`` with ``config``,
    a parsed ``config.json`` or its bytes) answers them under ``settings`` (default: the
    environment's, without its gRPC port or preload); :class:`ExportError` with the
    problem's status and detail where it refuses. With ``audit``, the precision audit of
    that table instead (``GET /v1/audit/FAMILY``: JSON, or ``png``). Callable where an
    event loop runs (a notebook's): the app then runs in a thread of its own."""
    out = io.BytesIO()
    export_to(out, family, parameters, fmt=fmt, config=config, settings=settings, audit=audit)
    return out.getvalue()


def export_to(
    out: BinaryIO,
    family: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    fmt: str | None = None,
    config: Mapping[str, Any] | bytes | None = None,
    settings: Settings | None = None,
    audit: bool = False,
) -> None:
    """:func:`export`'s bytes written to ``out`` a piece at a time: a table of rows as
    ``.npy`` or raw a block of rows at a time (rotary's two arrays so only where ``out``
    can seek), anything else as the app sends it (:mod:`service.exporting`), so that no
    copy of the answer is held; nothing is written when it refuses (:class:`ExportError`).
    An ``OSError`` of ``out``'s is raised once the app has answered."""
    paths = _audits() if audit else _paths()
    if family not in paths:
        raise ExportError(404, f"no family {family!r}; there are {', '.join(paths)}")
    given = dict(parameters or {})
    if fmt is not None and given.get("format", fmt) != fmt:
        raise ExportError(422, "format: give it once (as fmt, or among the parameters)")
    allowed = AUDIT_FORMATS if audit else FORMATS
    fmt = str(given.pop("format", fmt or allowed[0] if audit else fmt or "npy"))
    if fmt not in allowed:
        raise ExportError(422, f"format: must be one of {', '.join(allowed)}")
    query = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in {**given, "format": fmt}.items()
    }
    # the answer alone: no gRPC port taken (a running service may hold it), nothing preloaded,
    # nothing kept (each row is asked once)
    quiet = (settings or from_environment()).model_copy(
        update={"grpc_port": 0, "preload": "", "cache_bytes": 0}
    )
    if config is None:
        _run(exporting.ask(quiet, "GET", paths[family], query, None, out))
        return
    body = config if isinstance(config, bytes) else json.dumps(config).encode()
    _run(exporting.ask(quiet, "POST", paths[family] + "/from-config", query, body, out))


def _audits() -> dict[str, str]:
    """Each audited family's name and the path of its audit."""
    from service.routes import FAMILIES

    return {each.family.name: f"/v1/audit/{each.family.name}" for each in FAMILIES if each.audit}


def _run(work: Coroutine[Any, Any, None]) -> None:
    """``work`` run to its end, in a thread of its own where this one runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(work)
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, work).result()


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    named = Path(sys.argv[0]).name
    main = argparse.ArgumentParser(
        prog=named if named == "pe-service" else "python -m service",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = main.add_subparsers(dest="command", metavar="{serve,openapi,export,verify,identify}")
    commands.add_parser("serve", help="run the service (the default)")
    commands.add_parser("openapi", help="print the OpenAPI document")
    out = commands.add_parser(
        "export",
        help="write a family's table to a file, without a server",
        description=_EXPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    out.add_argument("family", help="sinusoidal, rotary, alibi, alibi-slopes, ...")
    out.add_argument("parameters", nargs="*", metavar="NAME=VALUE", help="the GET's parameters")
    out.add_argument(
        "--format",
        default=None,
        choices=sorted({*FORMATS, *AUDIT_FORMATS}),
        help="default: the output's suffix, else npy (json for --audit)",
    )
    out.add_argument("--audit", action="store_true", help="the table's precision audit")
    out.add_argument("--config", type=Path, help="a model's config.json (rotary): from-config")
    out.add_argument(
        "-o", "--output", type=Path, help="the file to write; - or none: standard output"
    )
    for name, described, summary in (
        ("verify", _VERIFY, "check a table file against a family's GET or a config"),
        ("identify", _IDENTIFY, "name the GETs that reproduce a table file"),
    ):
        check = commands.add_parser(
            name,
            help=summary,
            description=described,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        check.add_argument("table", type=Path, help="the table file (- : standard input)")
        if name == "verify":
            check.add_argument("--family", help="the table's family (with --config: rotary)")
            check.add_argument(
                "--param",
                action="append",
                default=[],
                metavar="NAME=VALUE",
                help="a GET parameter of the family (again for each)",
            )
            check.add_argument("--config", type=Path, help="a model's config.json: from-config")
        check.add_argument("--start", type=int, help="the position of the first row (default 0)")
        check.add_argument("--json", action="store_true", help="the JSON answer, as the route's")
    return main


def run_export(arguments: argparse.Namespace, settings: Settings) -> int:
    """``export``: 0 once written; 1 (and the service's refusal, or the file's trouble, in
    one line on standard error) if not; 2 for a command line it cannot read. ``-o -`` is
    standard output, as no ``-o``; a file is written beside itself and renamed into place
    once whole, so that a failed export leaves what was there."""
    given: dict[str, str] = {}
    for item in arguments.parameters:
        name, equals, value = item.partition("=")
        if not equals or not name or name in given:
            why = "is given twice" if name in given else "is not NAME=VALUE"
            sys.stderr.write(f"export: {item!r} {why}\n")
            return 2
        given[name] = value
    output = None if arguments.output in (None, Path("-")) else arguments.output
    fmt = arguments.format
    allowed = AUDIT_FORMATS if arguments.audit else FORMATS
    if fmt is None and output is not None and "format" not in given:
        fmt = output.suffix.lstrip(".")
        if fmt not in allowed:
            sys.stderr.write(f"export: {output}: give --format ({', '.join(allowed)})\n")
            return 2
    text = (fmt or given.get("format") or ("json" if arguments.audit else "npy")) == "json"
    if output is None and sys.stdout.isatty() and not text:
        sys.stderr.write("export: a binary table is not written to a terminal: give -o FILE\n")
        return 2
    try:
        config = arguments.config.read_bytes() if arguments.config else None
    except OSError as exc:
        sys.stderr.write(f"export: cannot read {arguments.config}: {exc.strerror or exc}\n")
        return 1
    try:
        with _writing(output) as out:
            export_to(
                out,
                arguments.family,
                given,
                fmt=fmt,
                config=config,
                settings=settings,
                audit=arguments.audit,
            )
    except ExportError as exc:
        sys.stderr.write(f"export: {exc.status}: {exc.detail}\n")
        return 1
    except OSError as exc:
        where = "standard output" if output is None else output
        sys.stderr.write(f"export: cannot write {where}: {exc.strerror or exc}\n")
        if isinstance(exc, BrokenPipeError):  # no second complaint as the interpreter exits
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def run_check(arguments: argparse.Namespace, settings: Settings) -> int:
    """``verify`` and ``identify``: 0 for a match, 1 for a difference, 2 (and the problem's
    detail on standard error) for what it cannot take; the answer on standard output, as
    JSON with ``--json``, else said for a terminal."""
    command = arguments.command
    paths = _paths()
    try:
        query: dict[str, str] = {}
        config = None
        if command == "verify":
            query = checking.parameters_of(arguments.param)
            for name in ("family", "start"):
                if name in query:
                    raise checking.Refused(f"--param {name}=...: give it as --{name}")
            family = arguments.family or ("rotary" if arguments.config else None)
            if family is None:
                raise checking.Refused("give --family (and --param NAME=VALUE), or --config")
            if family not in paths:
                raise checking.Refused(f"no family {family!r}; there are {', '.join(paths)}")
            query["family"] = family
            if arguments.config is not None:
                config = (paths[family] + "/from-config", checking.read(arguments.config))
        if arguments.start is not None:
            query["start"] = str(arguments.start)
        body = checking.read(arguments.table)
        fmt = checking.format_of(None if str(arguments.table) == "-" else arguments.table, body)
        answer = checking.ask(settings, f"/v1/{command}", body, fmt, query, config)
    except checking.Refused as exc:
        sys.stderr.write(f"{command}: {exc}\n")
        return checking.EXIT_USAGE
    if arguments.json:
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    elif command == "verify":
        sys.stdout.write(checking.verified(answer, paths))
    else:
        sys.stdout.write(checking.identified(answer, paths))
    matched = answer["match"] != "different" if command == "verify" else answer["matched"]
    return checking.EXIT_MATCH if matched else checking.EXIT_DIFFERENT


@contextlib.contextmanager
def _writing(path: Path | None) -> Iterator[BinaryIO]:
    """Where an export is written: standard output (``None``); or, for a regular file, a
    new file beside it (``.NAME.RANDOM.part``, with the old file's mode) renamed over it
    once whole and on disk, removed instead if anything fails; a path that is no regular
    file (``/dev/stdout``, a FIFO) is written where it is. A symbolic link's target is
    replaced, not the link."""
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with path.open("wb") as out:
            yield out
        return
    target = Path(os.path.realpath(path))
    part = target.with_name(f".{target.name[:200]}.{secrets.token_hex(4)}.part")
    # made as open() makes a file (0o666 less the umask), where no other file is
    made = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(made, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), stat.S_IMODE(mode))
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
        raise


def command(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line (``serve`` when none is named); ``--help`` exits here."""
    arguments = parser().parse_args(argv)
    arguments.command = arguments.command or "serve"
    return arguments

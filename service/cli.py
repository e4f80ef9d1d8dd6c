"""The command line: ``python -m service [serve|openapi|export]`` (and ``pe-service``).

``export`` writes any family's table without a server: the request is answered by the app
in this process (no port is opened), so the file is byte for byte the HTTP answer, with the
same parameters, defaults, limits and refusals. :func:`export` does it from Python.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from service.codecs.types import FORMATS
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


class ExportError(Exception):
    """A table the service refuses: the problem's status and detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


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
    # the answer alone: no gRPC port taken (a running service may hold it), nothing preloaded
    quiet = (settings or from_environment()).model_copy(update={"grpc_port": 0, "preload": ""})
    if config is None:
        return _run(_ask(quiet, "GET", paths[family], query, None))
    body = config if isinstance(config, bytes) else json.dumps(config).encode()
    return _run(_ask(quiet, "POST", paths[family] + "/from-config", query, body))


def _audits() -> dict[str, str]:
    """Each audited family's name and the path of its audit."""
    from service.routes import FAMILIES

    return {each.family.name: f"/v1/audit/{each.family.name}" for each in FAMILIES if each.audit}


def _run(work: Coroutine[Any, Any, bytes]) -> bytes:
    """``work`` run to its end, in a thread of its own where this one runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


async def _ask(
    settings: Settings, method: str, path: str, query: dict[str, str], body: bytes | None
) -> bytes:
    from service.app import create_app

    app = create_app(settings)
    headers = {"accept-encoding": "identity", "content-type": "application/json"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://export") as client,
    ):
        answer = await client.request(method, path, params=query, content=body, headers=headers)
    if answer.status_code != 200:
        try:
            detail = str(answer.json().get("detail", answer.text))
        except ValueError:
            detail = answer.text
        raise ExportError(answer.status_code, detail)
    return answer.content


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    named = Path(sys.argv[0]).name
    main = argparse.ArgumentParser(
        prog=named if named == "pe-service" else "python -m service",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = main.add_subparsers(dest="command", metavar="{serve,openapi,export}")
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
    out.add_argument("-o", "--output", type=Path, help="the file to write; default standard output")
    return main


def run_export(arguments: argparse.Namespace, settings: Settings) -> int:
    """``export``: 0 once written; 1 (and the service's refusal, or the file's trouble, on
    standard error) if not; 2 for a command line it cannot read."""
    given: dict[str, str] = {}
    for item in arguments.parameters:
        name, equals, value = item.partition("=")
        if not equals or not name or name in given:
            why = "is given twice" if name in given else "is not NAME=VALUE"
            sys.stderr.write(f"export: {item!r} {why}\n")
            return 2
        given[name] = value
    fmt = arguments.format
    allowed = AUDIT_FORMATS if arguments.audit else FORMATS
    if fmt is None and arguments.output is not None and "format" not in given:
        fmt = arguments.output.suffix.lstrip(".")
        if fmt not in allowed:
            sys.stderr.write(f"export: {arguments.output}: give --format ({', '.join(allowed)})\n")
            return 2
    text = (fmt or given.get("format") or ("json" if arguments.audit else "npy")) == "json"
    if arguments.output is None and sys.stdout.isatty() and not text:
        sys.stderr.write("export: a binary table is not written to a terminal: give -o FILE\n")
        return 2
    try:
        config = arguments.config.read_bytes() if arguments.config else None
        data = export(
            arguments.family,
            given,
            fmt=fmt,
            config=config,
            settings=settings,
            audit=arguments.audit,
        )
        if arguments.output is None:
            sys.stdout.buffer.write(data)
        else:
            arguments.output.write_bytes(data)
    except ExportError as exc:
        sys.stderr.write(f"export: {exc.status}: {exc.detail}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"export: {exc.filename}: {exc.strerror}\n")
        return 1
    return 0


def command(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line (``serve`` when none is named); ``--help`` exits here."""
    arguments = parser().parse_args(argv)
    arguments.command = arguments.command or "serve"
    return arguments

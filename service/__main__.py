"""``python -m service``: run the service under uvicorn with the ``PE_*`` settings.

``python -m service openapi`` prints the OpenAPI document instead (the committed
``openapi/openapi.json`` is this output), ``python -m service export`` writes a table
without a server, and ``verify`` and ``identify`` check one (:mod:`service.cli`); ``--help``
says so, and starts nothing.

Settings the service cannot start with stop it before it serves, with one line on standard
error and exit status 2: an unknown ``PE_`` variable, a malformed value, a ``PE_PRELOAD``
that does not parse, is over the limits or does not fit the cache, ``PE_POSTED_BYTES``
under the largest body, a metrics directory that is not an empty writable one,
``PE_GRPC_PORT`` without the grpc extra, or held by another process (another instance).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Final, NoReturn

import uvicorn

from service import cli
from service.server import supervision
from service.settings import Settings, SettingsError, from_environment

EXIT_SETTINGS: Final = 2


def log_config(settings: Settings) -> dict[str, Any]:
    """Logging for uvicorn and the service on standard error: text lines, or JSON lines
    for log shippers. The access log is the service's own, on standard output (see
    ``service.middleware.telemetry``); its logger's level only switches it on or off."""
    text = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    json_format = {"()": "service.middleware.telemetry.JsonFormatter"}
    level = settings.log_level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": json_format if settings.log_format == "json" else {"format": text}
        },
        # it also routes Python's warnings to the py.warnings logger, in every worker
        "handlers": {
            "default": {"()": "service.middleware.telemetry.stderr_handler", "formatter": "default"}
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": [], "propagate": False},
            "service": {"handlers": ["default"], "level": level, "propagate": False},
            "service.access": {"handlers": [], "level": level, "propagate": False},
            "py.warnings": {"handlers": ["default"], "level": level, "propagate": False},
        },
        # any other library's records (asyncio's, say) in the same format, not as logging's
        # last-resort plain text; at WARNING, as that last resort has them
        "root": {
            "handlers": ["default"],
            "level": "WARNING" if level in ("DEBUG", "INFO") else level,
        },
    }


def _readers() -> Mapping[str, Any]:
    from service.routes import FAMILIES
    from service.web.families import readers

    return readers(FAMILIES)


def checked_settings() -> Settings:
    """The settings from the environment, checked as far as they can be before the service
    starts (what ``create_app`` and its lifespan would refuse later, with a traceback), or
    a :class:`SettingsError` of one line."""
    settings = from_environment()
    from service import preload

    try:
        # a family's NAME?QUERY needs the routes' declarations (the web framework): only then
        preload.checked(settings, _readers() if "?" in settings.preload else {})
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    check_metrics_directory(os.environ)
    if settings.grpc_port:
        try:
            importlib.import_module("service.inference.grpc")
        except ImportError as exc:
            raise SettingsError(
                f"PE_GRPC_PORT={settings.grpc_port} is set, but the grpc extra is not "
                f"installed ({exc}): install the service with it (pip install '.[grpc]'), "
                "or unset PE_GRPC_PORT"
            ) from None
    return settings


def refuse(error: SettingsError) -> NoReturn:
    """One line on standard error, and exit status 2: a JSON object where PE_LOG_FORMAT
    says json (as every other line there is), even when another setting is refused."""
    line = " ".join(str(error).split())
    if os.environ.get("PE_LOG_FORMAT", "").strip().lower() == "json":
        from service.middleware.telemetry import JsonFormatter

        record = logging.LogRecord("service", logging.CRITICAL, __file__, 0, line, None, None)
        line = JsonFormatter().format(record)
    sys.stderr.write(line + "\n")
    raise SystemExit(EXIT_SETTINGS) from None


def main() -> None:
    arguments = cli.command(sys.argv[1:])  # --help and a misspelt command stop here
    try:
        settings = checked_settings()
    except SettingsError as exc:
        refuse(exc)
    if arguments.command == "openapi":
        from service.app import create_app

        spec = create_app(settings).openapi()
        sys.stdout.write(json.dumps(spec, indent=2, sort_keys=True) + "\n")
        return
    if arguments.command == "export":
        raise SystemExit(cli.run_export(arguments, settings))
    if arguments.command in ("verify", "identify"):
        raise SystemExit(cli.run_check(arguments, settings))
    try:
        # held by the supervisor until its workers have stopped (uvicorn.run returns)
        grpc_port = supervision.hold_grpc_port(settings)
    except SettingsError as exc:
        refuse(exc)
    with grpc_port or contextlib.nullcontext(), supervision.metrics_directory(settings.workers):
        uvicorn.run(
            "service.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level=settings.log_level,
            log_config=log_config(settings),
            access_log=False,
            timeout_graceful_shutdown=settings.shutdown_timeout,
            http="service.server.protocol:BoundedHttpToolsProtocol",
        )


def check_metrics_directory(environ: Mapping[str, str]) -> None:
    """A metrics directory named for prometheus-client's multiprocess mode must be an empty
    directory this process can write: a missing one stops every worker at its first
    request, and an earlier run's files would be counted again."""
    from service.metrics import DIRECTORY_VARIABLES

    for name in DIRECTORY_VARIABLES:
        if name not in environ:
            continue
        path = environ[name]
        what = f"{name}={path!r} (where several workers keep their metrics: docs/deploy.md)"
        if not path or not os.path.isdir(path):
            raise SettingsError(f"{what} is not a directory: name an empty one, or unset it")
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise SettingsError(f"{what} is not readable and writable by this user")
        try:
            with os.scandir(path) as entries:
                empty = next(entries, None) is None
        except OSError as exc:
            raise SettingsError(f"{what} cannot be read: {exc.strerror}") from None
        if not empty:
            raise SettingsError(
                f"{what} is not empty: an earlier run's metrics would be counted again; "
                "empty it, or unset it (python -m service then makes one of its own)"
            )


if __name__ == "__main__":
    main()

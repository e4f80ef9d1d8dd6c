"""``python -m service``: run the service under uvicorn with the ``PE_*`` settings.

``python -m service openapi`` prints the OpenAPI document instead (the committed
``openapi/openapi.json`` is this output).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn

from service.settings import Settings


def log_config(settings: Settings) -> dict[str, Any]:
    """Logging for uvicorn and the service: text lines, or JSON lines for log shippers.
    The access log is the service's own (one line per request, with its duration)."""
    text = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    json_format = {"()": "service.telemetry.JsonFormatter"}
    formatter = json_format if settings.log_format == "json" else {"format": text}
    access = json_format if settings.log_format == "json" else {"format": "%(asctime)s %(message)s"}
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter, "access": access},
        "handlers": {
            "default": {**handler, "formatter": "default"},
            "access": {**handler, "formatter": "access", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": settings.log_level.upper()},
            "uvicorn.access": {"handlers": [], "propagate": False},
            "service": {"handlers": ["default"], "level": settings.log_level.upper()},
            "service.access": {
                "handlers": ["access"],
                "level": settings.log_level.upper(),
                "propagate": False,
            },
        },
    }


def main() -> None:
    if sys.argv[1:] == ["openapi"]:
        from service.main import create_app

        spec = create_app(Settings()).openapi()
        sys.stdout.write(json.dumps(spec, indent=2, sort_keys=True) + "\n")
        return
    settings = Settings()
    uvicorn.run(
        "service.main:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
        log_config=log_config(settings),
        access_log=False,
        timeout_graceful_shutdown=settings.shutdown_timeout,
    )


if __name__ == "__main__":
    main()

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
    """Logging for uvicorn and the service on standard error: text lines, or JSON lines
    for log shippers. The access log is the service's own, on standard output (see
    ``service.telemetry``); its logger's level only switches it on or off."""
    text = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    json_format = {"()": "service.telemetry.JsonFormatter"}
    level = settings.log_level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": json_format if settings.log_format == "json" else {"format": text}
        },
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "default",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level},
            "uvicorn.access": {"handlers": [], "propagate": False},
            "service": {"handlers": ["default"], "level": level},
            "service.access": {"handlers": [], "level": level, "propagate": False},
        },
    }


def main() -> None:
    if sys.argv[1:] == ["openapi"]:
        from service.app import create_app

        spec = create_app(Settings()).openapi()
        sys.stdout.write(json.dumps(spec, indent=2, sort_keys=True) + "\n")
        return
    settings = Settings()
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
        http="service.protocol:BoundedHttpToolsProtocol",
    )


if __name__ == "__main__":
    main()

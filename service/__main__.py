"""``python -m service``: run the service under uvicorn with the ``PE_*`` settings."""

from __future__ import annotations

import uvicorn

from service.settings import Settings


def main() -> None:
    settings = Settings()
    uvicorn.run(
        "service.main:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
    )


if __name__ == "__main__":
    main()

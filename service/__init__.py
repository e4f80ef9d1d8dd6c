"""The positional-encoding service."""

import sys

if sys.version_info < (3, 11):  # noqa: UP036 - before anything written for 3.11 is imported
    found = ".".join(map(str, sys.version_info[:3]))
    sys.exit(f"the service needs Python 3.11 or newer; this is Python {found}")

from importlib import metadata

try:
    __version__ = metadata.version("positional-encoding-service")
except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
    __version__ = "0+unknown"

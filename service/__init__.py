"""The positional-encoding service."""

from importlib import metadata

try:
    __version__ = metadata.version("positional-encoding-service")
except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
    __version__ = "0+unknown"

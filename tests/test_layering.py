"""The pure modules import no web framework: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

WEB = ("fastapi", "starlette", "uvicorn", "httpx", "pydantic", "pydantic_settings")


@pytest.mark.parametrize(
    "module", ["service.core", "service.cache", "service.codecs", "service.errors", "service.plots"]
)
def test_pure_modules_import_no_web_framework(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    assert module in loaded
    assert not {name for name in loaded if name.split(".")[0] in WEB}


def test_matplotlib_is_loaded_only_for_the_first_picture() -> None:
    """The service starts (and stays small) without importing the plotting library."""
    code = "import sys, service.main; service.main.create_app(); print(' '.join(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert "service.plots" in loaded
    assert not {name for name in loaded if name.split(".")[0] == "matplotlib"}

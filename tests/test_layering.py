"""The pure modules import no web framework: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

WEB = ("fastapi", "starlette", "uvicorn", "httpx", "pydantic", "pydantic_settings")


@pytest.mark.parametrize(
    "module", ["service.core", "service.cache", "service.codecs", "service.errors"]
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

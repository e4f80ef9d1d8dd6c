"""The ``curl`` examples of ``docs/http-api.md`` run as written against a real server: each
shell block that needs no file it does not make (a model's ``config.json`` as published is
the reader's) and is not a documented refusal, with curl failing on any 4xx or 5xx (a
``.curlrc`` of ``fail``), only the address changed. The tables it writes are read back."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import numpy as np
import pytest

from tests.support import ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("curl") is None, reason="no curl"),
]
PAGE: Final = ROOT / "docs" / "http-api.md"
DOCUMENTED: Final = "http://127.0.0.1:8000"


def examples() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.S)
    return [
        block
        for block in blocks
        if "curl" in block
        and "@config.json" not in block  # the reader's own file
        and '"status":4' not in block  # a refusal, shown as one
    ]


def test_the_page_has_examples_of_every_diffusion_family() -> None:
    found = "\n".join(examples())
    for path in ("timestep", "sincos-2d", "rope-nd"):
        assert f"/v1/encodings/{path}" in found


@pytest.mark.parametrize("block", examples(), ids=lambda block: block.split("\n")[0][:48])
def test_an_example_runs_as_written(live_url: str, tmp_path: Path, block: str) -> None:
    (tmp_path / ".curlrc").write_text("fail\nshow-error\n")
    script = block.replace(DOCUMENTED, live_url)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        # the examples' python3 is one with numpy: this interpreter's
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "CURL_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for written in tmp_path.glob("*.np[yz]"):
        loaded = np.load(written, allow_pickle=False)
        arrays = [loaded[name] for name in loaded.files] if written.suffix == ".npz" else [loaded]
        assert not any(np.isnan(array).any() for array in arrays), written.name  # ALiBi: -inf

"""The ``curl`` examples of ``docs/http-api.md`` run as written against a real server: each
shell block that needs no file it does not make (a model's ``config.json`` as published is
the reader's) and is not a documented refusal, with curl failing on any 4xx or 5xx (a
``.curlrc`` of ``fail``), only the address changed. The tables it writes are read back."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import numpy as np
import pytest

from service.encodings import vision_rotary
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


def test_the_page_has_an_example_of_every_vision_tower() -> None:
    found = "\n".join(examples())
    for model in vision_rotary.MODELS:
        if model not in ("qwen2_vl", "qwen3_vl"):  # Qwen2.5-VL's stands for the three
            assert f"/v1/encodings/vision-rotary?model={model}&" in found, model
    for path in ("positions", "apply", "from-config"):
        assert f"/v1/encodings/vision-rotary/{path}?" in found
    assert "/v1/audit/vision-rotary?" in found


def printed(block: str) -> str | None:
    """What a block that ends in a ``python3 -c`` program says it prints: the comment lines
    after the program, each without its ``# ``; ``None`` for a block that says nothing."""
    lines = block.rstrip("\n").split("\n")
    said = list(itertools.takewhile(lambda line: line.startswith("# "), reversed(lines)))
    program = lines[len(lines) - len(said) - 1] if len(said) < len(lines) else ""
    if not said or not program.endswith("'") or "python3 -c" not in block:
        return None
    return "".join(f"{line.removeprefix('# ')}\n" for line in reversed(said))


def run(block: str, url: str, where: Path) -> str:
    """The block run as written against ``url``, in ``where``: its standard output."""
    (where / ".curlrc").write_text("fail\nshow-error\n")
    script = block.replace(DOCUMENTED, url)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=where,
        # the examples' python3 is one with numpy: this interpreter's
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "CURL_HOME": str(where)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_block_says_what_it_prints_as_its_trailing_comments() -> None:
    block = "curl -o t.npz x\npython3 -c '\nprint(1)'\n# 1\n# (2, 3)\n"
    assert printed(block) == "1\n(2, 3)\n"
    assert printed('curl x\n# {"a": 1}\n') is None  # an answer shown, not a program's
    assert printed("curl x\n") is None


@pytest.mark.parametrize("block", examples(), ids=lambda block: block.split("\n")[0][:48])
def test_an_example_runs_as_written(live_url: str, tmp_path: Path, block: str) -> None:
    """Each runs; one whose program's output follows it as comments prints just that."""
    output = run(block, live_url, tmp_path)
    expected = printed(block)
    if expected is not None:
        assert output == expected
    for written in tmp_path.glob("*.np[yz]"):
        loaded = np.load(written, allow_pickle=False)
        arrays = [loaded[name] for name in loaded.files] if written.suffix == ".npz" else [loaded]
        assert not any(np.isnan(array).any() for array in arrays), written.name  # ALiBi: -inf

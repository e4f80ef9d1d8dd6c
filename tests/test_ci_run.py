"""``bash .ci/run`` on a machine that lacks what it needs and has no ``apt-get``: one line
saying what to install, and a failure, before anything is installed or run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def test_without_apt_get_it_says_what_to_install(tmp_path: Path) -> None:
    tools = tmp_path / "bin"  # the shell's few helpers, and nothing else: no apt-get
    tools.mkdir()
    for name in ("dirname", "id"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    done = subprocess.run(
        [str(shutil.which("bash")), str(ROOT / ".ci" / "run")],
        env={"PATH": str(tools), "PYTHON": sys.executable, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("bash .ci/run: no apt-get")
    for package in ("curl", "nodejs", "golang-go", "default-jdk-headless", "rustc"):
        assert package in line
    assert not (tmp_path / ".venv").exists()
    assert os.listdir(tmp_path) == ["bin"]

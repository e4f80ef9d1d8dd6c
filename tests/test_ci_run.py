"""``bash .ci/run`` on a machine that lacks what it needs and has no ``apt-get``: one line
saying what to install, and a failure, before anything is installed or run. And with every
tool it calls a stub: each check runs whatever the others' outcome, the run failing at the
end with the names of those that failed; a failed install stops it at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

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


# the checks .ci/run runs, by the name it gives each, and the command a stub records of it
CHECKS: Final = {
    "format": "ruff format",
    "lint": "ruff check",
    "types": "mypy",
    "tests": "pytest",
    "javascript": "node --test",
    "conformance": "conformance-pytest",
}
_STUB: Final = """#!/bin/sh
name="{name}"
[ "$name" = ruff ] && name="ruff $1"
[ "$name" = node ] && {{ [ "$1" = -e ] && exit 0; name="node $1"; }}
[ "$name" = python ] && name="$2"  # python -m pip: "pip"
echo "$name" >> "$CI_LOG"
case ",$CI_FAIL," in *",$name,"*) exit 1 ;; esac
exit 0
"""


def _run_with_stubs(
    tmp_path: Path, fail: list[str]
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``.ci/run`` in a copy of its folder, every tool it calls a stub that records its call
    and fails when named in ``fail``: what it ran, in order, and how it ended."""
    root = tmp_path / "root"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", root / ".ci" / "run")
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("dirname", "id", "env"):  # the shell's few helpers
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    stubs = {
        tools: ["nginx", "curl", "go", "javac", "rustc", "node", "kustomize", "chromium"],
        root / ".venv" / "bin": ["python", "ruff", "mypy", "pytest"],
        root / ".venv" / "conformance" / "bin": ["python", "pytest"],
    }
    for folder, names in stubs.items():
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            stub = folder / name
            named = (
                "conformance-pytest" if "conformance" in str(folder) and name == "pytest" else name
            )
            stub.write_text(_STUB.format(name=named))
            stub.chmod(0o755)
    log = tmp_path / "ran.log"
    done = subprocess.run(
        [str(shutil.which("bash")), str(root / ".ci" / "run")],
        env={
            "PATH": str(tools),
            "PYTHON": sys.executable,
            "HOME": str(tmp_path),
            "TEST_CHROMIUM": str(tools / "chromium"),
            "CI_LOG": str(log),
            "CI_FAIL": ",".join(fail),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, log.read_text().splitlines() if log.exists() else []


def test_every_check_runs_when_one_fails_and_the_run_names_the_failed(tmp_path: Path) -> None:
    """The format and the tests fail: lint, types, the JavaScript and the conformance tests
    run all the same, and the run fails naming the two."""
    done, ran = _run_with_stubs(tmp_path, ["ruff format", "pytest"])
    assert [line for line in ran if line in CHECKS.values()] == list(CHECKS.values())
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "bash .ci/run: failed: format tests"


def test_when_every_check_passes_the_run_passes(tmp_path: Path) -> None:
    done, ran = _run_with_stubs(tmp_path, [])
    assert [line for line in ran if line in CHECKS.values()] == list(CHECKS.values())
    assert done.returncode == 0, done.stderr


def test_a_failed_install_stops_the_run_before_any_check(tmp_path: Path) -> None:
    done, ran = _run_with_stubs(tmp_path, ["pip"])
    assert done.returncode != 0
    assert ran == ["pip"]

"""The client snippets of docs/clients.md ("## Clients"), taken as they are written and run
against a live service: the Python client's, the JavaScript client's and the plain
``fetch`` one under Node, and the Go, Rust and Java programs, each built and run with the
command its first comment states. Each prints ``PE[100, 7]`` of the 2048 x 512 float32
table, which must be the service's value. A missing toolchain skips its test, or fails it
where ``SNIPPETS_REQUIRED`` is set (``bash .ci/run`` sets it and installs them). The
browser snippet is not run."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np
import pytest

from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey
from tests.support import ROOT

README = ROOT / "docs" / "clients.md"
DEFAULT = "127.0.0.1:8000"
# PE[100, 7] of the paper's float32 table, as every snippet prints it
PE_100_7 = registry.rows(SinusoidalKey(512), 100, 101)[0, 7]


def snippets(subsection: str, language: str) -> list[str]:
    """The ``language`` code blocks of ``### subsection`` of the README's "## Clients"."""
    text = README.read_text()
    clients = text[text.index("\n## Clients\n") :]
    following_section = clients.find("\n## ", 1)
    clients = clients if following_section < 0 else clients[:following_section]
    part = clients[clients.index(f"\n### {subsection}\n") :]
    following = part.find("\n### ", 1)
    part = part if following < 0 else part[:following]
    found = re.findall(rf"^```{language}\n(.*?)^```$", part, flags=re.DOTALL | re.MULTILINE)
    assert found, f"no {language} snippet under ### {subsection}"
    return found


def pointed(snippet: str, url: str) -> str:
    """``snippet`` with the service's address replaced by the live one."""
    assert DEFAULT in snippet
    return snippet.replace(DEFAULT, url.removeprefix("http://"))


def run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def assert_prints_the_value(output: str) -> None:
    found = re.search(r"PE\[100, 7\] = (\S+)", output)
    assert found, output
    assert np.float32(float(found[1])) == PE_100_7, (found[1], PE_100_7)


def as_written(snippet: str, command: str) -> str:
    """The command (a regular expression) that the snippet's first comment says runs it."""
    comment = "\n".join(
        itertools.takewhile(lambda line: line.startswith("//"), snippet.split("\n"))
    )
    found = re.search(command, comment, re.MULTILINE)
    assert found, f"the snippet's first comment does not say how to run it ({command}):\n{comment}"
    return found[0]


def in_shell(command: str, cwd: Path, tool: str, env: dict[str, str] | None = None) -> str:
    """``command`` run as a person would type it, with ``tool``'s folder first on the PATH."""
    env = {**os.environ, **(env or {})}
    env["PATH"] = f"{Path(tool).parent}{os.pathsep}{env.get('PATH', '')}"
    return run(["bash", "-c", command], cwd=cwd, env=env)


def missing(reason: str) -> NoReturn:
    """Skip for want of a toolchain, or fail where ``bash .ci/run`` has installed them."""
    if os.environ.get("SNIPPETS_REQUIRED"):
        pytest.fail(f"{reason} (SNIPPETS_REQUIRED is set: bash .ci/run installs it)")
    pytest.skip(reason)


def node() -> str:
    found = shutil.which("node")
    if found is None:
        missing("node (Node.js 18+, Debian's nodejs) is not installed: the JavaScript snippets")
    return found


def go() -> str:
    found = os.environ.get("GO") or shutil.which("go")
    if found is None or not Path(found).is_file():
        missing("go (Debian's golang-go, Go 1.19+) is not installed, nor $GO: the Go snippet")
    return found


def rustc() -> str:
    candidates = [os.environ.get("RUSTC"), shutil.which("rustc")]
    candidates.append(str(Path.home() / ".cargo" / "bin" / "rustc"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    missing("rustc (Debian's rustc, 1.63+) is not installed, nor $RUSTC: the Rust snippet")


def javac() -> str:
    """The JDK's javac, beside its java (resolved: /usr/bin's are links to the JDK's)."""
    found = shutil.which("javac")
    if found is None or not (Path(found).resolve().parent / "java").is_file():
        missing(
            "javac (a JDK 17+, Debian's default-jdk-headless) is not installed: the Java snippet"
        )
    return str(Path(found).resolve())


# a toolchain's start and a real server, the full run's (bash .ci/run, with
# SNIPPETS_REQUIRED)
TOOLCHAIN = pytest.mark.slow


@TOOLCHAIN
def test_the_python_clients_snippet(live_url: str) -> None:
    (snippet,) = snippets("Python", "python")
    output = run([sys.executable, "-c", pointed(snippet, live_url)])
    assert_prints_the_value(output)
    assert "422 PE_MAX_ELEMENTS" in output


@TOOLCHAIN
def test_the_javascript_clients_snippet_under_node(live_url: str, tmp_path: Path) -> None:
    snippet = snippets("JavaScript", "javascript")[0]
    modules = tmp_path / "node_modules"
    modules.mkdir()
    (modules / "positional-encoding-client").symlink_to(ROOT / "clients" / "js")
    (tmp_path / "snippet.mjs").write_text(pointed(snippet, live_url))
    output = run([node(), "snippet.mjs"], cwd=tmp_path)
    assert_prints_the_value(output)
    assert "\n512\n" in output
    assert "422 PE_MAX_ELEMENTS" in output


@TOOLCHAIN
def test_the_plain_fetch_snippet_under_node(live_url: str, tmp_path: Path) -> None:
    (snippet,) = snippets("Other languages", "javascript")
    (tmp_path / "snippet.mjs").write_text(pointed(snippet, live_url))
    assert_prints_the_value(run([node(), "snippet.mjs"], cwd=tmp_path))


@TOOLCHAIN
def test_the_go_program(live_url: str, tmp_path: Path) -> None:
    """``go vet`` and ``gofmt`` find nothing, then ``go run pe.go`` as the comment says."""
    tool = go()
    (snippet,) = snippets("Other languages", "go")
    command = as_written(snippet, r"go run (\w+\.go)$")
    name = command.removeprefix("go run ")
    (tmp_path / name).write_text(pointed(snippet, live_url))
    # no go.mod: nothing to download; the user's build cache, or one here if there is none
    env = {"GOTOOLCHAIN": "local", "GOFLAGS": "", "GO111MODULE": ""}
    if not any(os.environ.get(v) for v in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = str(tmp_path / "go-build")
    in_shell(f"go vet {name}", tmp_path, tool, env)
    assert in_shell(f"gofmt -l {name}", tmp_path, tool, env) == ""
    assert_prints_the_value(in_shell(command, tmp_path, tool, env))


@TOOLCHAIN
def test_the_rust_program(live_url: str, tmp_path: Path) -> None:
    """Without a warning, then ``rustc --edition 2021 pe.rs && ./pe`` as the comment says."""
    tool = rustc()
    (snippet,) = snippets("Other languages", "rust")
    command = as_written(snippet, r"rustc --edition 2021 (\w+)\.rs && \./\1$")
    name = command.split()[3]
    (tmp_path / name).write_text(pointed(snippet, live_url))
    run(
        [tool, "--edition", "2021", "-D", "warnings", "-o", str(tmp_path / "strict"), name],
        tmp_path,
    )
    assert_prints_the_value(in_shell(command, tmp_path, tool))


# javac and two virtual machines' starts: the most CPU of any test of the inner loop; CI's
# full run has it (bash .ci/run, with SNIPPETS_REQUIRED)
@pytest.mark.slow
def test_the_java_program(live_url: str, tmp_path: Path) -> None:
    """Without a lint warning, then ``java PeTable.java`` (the JDK's source launcher) as the
    comment says; the file is named after its public class, as javac requires."""
    tool = javac()
    (snippet,) = snippets("Other languages", "java")
    command = as_written(snippet, r"java (\w+)\.java$")
    name = command.removeprefix("java ")
    assert re.search(rf"^public class {name.removesuffix('.java')} ", snippet, re.MULTILINE)
    (tmp_path / name).write_text(pointed(snippet, live_url))
    run([tool, "-Xlint:all", "-Werror", "-d", str(tmp_path / "classes"), name], tmp_path)
    assert_prints_the_value(in_shell(command, tmp_path, tool))

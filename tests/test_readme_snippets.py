"""The README's client snippets ("## Clients"), taken from the README as they are and run
against a live service: the Python client's, the JavaScript client's and the plain
``fetch`` one under Node, and the Rust one (standard library only) built with rustc. Each
prints ``PE[100, 7]`` of the 2048 x 512 float32 table, which must be the service's value.
The Go and browser snippets are not run (no Go toolchain or page here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def run(argv: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def assert_prints_the_value(output: str) -> None:
    found = re.search(r"PE\[100, 7\] = (\S+)", output)
    assert found, output
    assert np.float32(float(found[1])) == PE_100_7, (found[1], PE_100_7)


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node (Node.js 18+) is not installed: the JavaScript snippets need it")
    return found


def rustc() -> str:
    candidates = [os.environ.get("RUSTC"), shutil.which("rustc")]
    candidates.append(str(Path.home() / ".cargo" / "bin" / "rustc"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip("rustc is not installed (nor $RUSTC, nor ~/.cargo/bin/rustc): the Rust snippet")


def test_the_python_clients_snippet(live_url: str) -> None:
    (snippet,) = snippets("Python", "python")
    output = run([sys.executable, "-c", pointed(snippet, live_url)])
    assert_prints_the_value(output)
    assert "422 PE_MAX_ELEMENTS" in output


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


def test_the_plain_fetch_snippet_under_node(live_url: str, tmp_path: Path) -> None:
    (snippet,) = snippets("Other languages", "javascript")
    (tmp_path / "snippet.mjs").write_text(pointed(snippet, live_url))
    assert_prints_the_value(run([node(), "snippet.mjs"], cwd=tmp_path))


def test_the_rust_snippet(live_url: str, tmp_path: Path) -> None:
    (snippet,) = snippets("Other languages", "rust")
    source = tmp_path / "pe.rs"
    source.write_text(pointed(snippet, live_url))
    binary = tmp_path / "pe"
    run([rustc(), "--edition", "2021", "-D", "warnings", "-o", str(binary), str(source)])
    assert_prints_the_value(run([str(binary)]))

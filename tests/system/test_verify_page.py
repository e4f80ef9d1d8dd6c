"""docs/verify.md says what the service answers: its Go, Rust and Java programs are built
and run with the commands the page gives (after ``go vet`` and ``gofmt``, ``rustc -D
warnings``, ``javac -Xlint:all -Werror``), each ``sh`` block runs as written against a live
service (only the address changed) and answers the match and the mistakes its comment
quotes, and the answers pasted as JSON are the service's for the tables the page says made
them. A missing toolchain skips its test, as for docs/clients.md's programs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from tests.support import ROOT, WAIT
from tests.test_readme_snippets import go, in_shell, javac, pointed, run, rustc

pytestmark = pytest.mark.slow
PAGE: Final = ROOT / "docs" / "verify.md"
LLAMA_31: Final = (
    "family=rotary&head_dim=128&base=500000&scaling=llama3&factor=8&low_freq_factor=1"
    "&high_freq_factor=4&original_max_position_embeddings=8192"
)
RAW: Final = {
    "content-type": "application/octet-stream",
    "x-shape": "2,16384,128",
    "x-dtype": "float32",
}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.DOTALL | re.MULTILINE)


def said(block: str) -> tuple[str, list[str]]:
    """The match and the mistakes a block's comments quote."""
    comments = "".join(line.lstrip("# ") for line in block.splitlines() if line.startswith("#"))
    match = re.search(r'"match":"(\w+)"', comments)
    assert match, block
    return match[1], re.findall(r'"mistake":"([\w-]+)"', comments)


def answer(output: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return found


def test_the_go_port_is_checked_as_the_page_says(live_url: str, tmp_path: Path) -> None:
    """The correct port matches (``library``); without the scaling, with the other pairing,
    and with both, the answers are those the page pastes; identify names Llama 3.1's GET."""
    tool = go()
    (program,) = blocks("go")
    (tmp_path / "rope.go").write_text(program)
    env = {"GOTOOLCHAIN": "local", "GOFLAGS": "", "GO111MODULE": ""}
    in_shell("go vet rope.go", tmp_path, tool, env)
    assert in_shell("gofmt -l rope.go", tmp_path, tool, env) == ""
    verified, identified = [b for b in blocks("sh") if "go run rope.go" in b]
    output = answer(in_shell(pointed(verified, live_url), tmp_path, tool, env))
    match, mistakes = said(verified)
    assert (output["match"], [d["mistake"] for d in output["diagnoses"]]) == (match, mistakes)
    pasted = [json.loads(b) for b in blocks("json") if '"diagnoses"' in b]
    with httpx.Client(base_url=live_url, timeout=WAIT) as http:
        for flags, expected in zip(
            ("", "-llama3 -interleaved", "-interleaved"), pasted, strict=True
        ):
            in_shell(f"go run rope.go {flags}", tmp_path, tool, env)
            body = (tmp_path / "rope.f32").read_bytes()
            found = http.post(f"/v1/verify?{LLAMA_31}", content=body, headers=RAW).json()
            assert {name: found[name] for name in expected} == expected, flags
    output = answer(in_shell(pointed(identified, live_url), tmp_path, tool, env))
    best = output["candidates"][0]
    assert (output["matched"], best["match"], best["parameters"]["convention"]) == (
        True,
        "library",
        "interleaved",
    )
    assert best["parameters"]["scaling"] == "llama3"
    assert f'"tried": {output["tried"]}' in PAGE.read_text()


def test_the_rust_port_is_checked_as_the_page_says(live_url: str, tmp_path: Path) -> None:
    tool = rustc()
    (program,) = blocks("rust")
    (tmp_path / "pe.rs").write_text(program)
    run([tool, "--edition", "2021", "-D", "warnings", "-o", "strict", "pe.rs"], tmp_path)
    (checked,) = [b for b in blocks("sh") if "./pe" in b]
    output = answer(in_shell(pointed(checked, live_url), tmp_path, tool))
    match, mistakes = said(checked)
    assert (output["match"], [d["mistake"] for d in output["diagnoses"]]) == (match, mistakes)


def test_the_java_port_is_checked_as_the_page_says(live_url: str, tmp_path: Path) -> None:
    tool = javac()
    (program,) = blocks("java")
    (tmp_path / "PeJson.java").write_text(program)
    run([tool, "-Xlint:all", "-Werror", "-d", "classes", "PeJson.java"], tmp_path)
    (checked,) = [b for b in blocks("sh") if "java PeJson.java" in b]
    output = answer(in_shell(pointed(checked, live_url), tmp_path, tool))
    match, mistakes = said(checked)
    assert (output["match"], [d["mistake"] for d in output["diagnoses"]]) == (match, mistakes)
    assert output["diagnoses"][0]["parameters"]["start"] == 1

"""``python -m service verify|identify``: the route's answer for a table file, without a
server; exit status 0 for a match, 1 for a difference, 2 for what it cannot take."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest

from service import checking
from tests.support import ROOT, client_of, main_in_process

ROTARY = "/v1/encodings/rotary"
SMALL = {"max_len": "32", "head_dim": "8"}
CONFIG = {
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "hidden_size": 64,
    "num_attention_heads": 4,
    "max_position_embeddings": 32,
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> httpx.Client:
    return client_of(in_process_app)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, http: httpx.Client) -> Path:
    """A small rotary table as the service sends it, in ``.npz``."""
    path = tmp_path_factory.mktemp("tables") / "rope.npz"
    answer = http.get(ROTARY, params={**SMALL, "format": "npz"})
    answer.raise_for_status()
    path.write_bytes(answer.content)
    return path


def test_a_served_table_matches_and_exits_0(table: Path, http: httpx.Client) -> None:
    done = main_in_process("verify", str(table), "--family", "rotary", "--param", "head_dim=8")
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode()
    assert said.startswith("match: bitwise\n")
    assert "first over: never past 1e-3" in said
    as_json = main_in_process(
        "verify", str(table), "--family", "rotary", "--param", "head_dim=8", "--json"
    )
    route = http.post(
        "/v1/verify",
        params={"family": "rotary", "head_dim": "8"},
        content=table.read_bytes(),
        headers={"content-type": "application/x-npz"},
    )
    assert json.loads(as_json.stdout) == orjson.loads(route.content)


def test_a_vision_tower_s_table_is_checked_by_its_model_and_grid(
    tmp_path: Path, http: httpx.Client
) -> None:
    qwen = {"model": "qwen2_5_vl", "grid": "1,8,16"}
    answer = http.get("/v1/encodings/vision-rotary", params={**qwen, "format": "npz"})
    answer.raise_for_status()
    path = tmp_path / "vision.npz"
    path.write_bytes(answer.content)
    claim = ["--param", "model=qwen2_5_vl", "--param", "grid=1,8,16"]
    done = main_in_process("verify", str(path), "--family", "vision-rotary", *claim)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"match: bitwise\n")
    # two windows of 4 x 4 merged tokens side by side: the windowed order is another table
    windowed = [*claim, "--param", "window_index=true"]
    moved = main_in_process("verify", str(path), "--family", "vision-rotary", *windowed)
    assert moved.returncode == 1, moved.stderr


def test_a_wrong_base_exits_1_with_its_diagnosis(table: Path) -> None:
    done = main_in_process(
        "verify", str(table), "--family", "rotary", "--param", "head_dim=8", "--param", "base=20000"
    )
    assert done.returncode == 1, done.stderr
    said = done.stdout.decode()
    assert said.startswith("match: different\n")
    assert "bands with the largest difference:\n  positions 16..31" in said
    # the diagnosis names the GET that made the posted table
    assert "  base (from position 1," in said
    assert f"reproduced by GET {ROTARY}?base=10000&" in said


def test_a_config_is_the_claim_from_config_reads(tmp_path: Path, http: httpx.Client) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    made = http.post(f"{ROTARY}/from-config", params={"format": "npy"}, json=CONFIG)
    made.raise_for_status()
    posted = tmp_path / "rope.npy"
    posted.write_bytes(made.content)
    done = main_in_process("verify", str(posted), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert b"scaling=llama3" in done.stdout
    plain = http.get(
        ROTARY, params={"max_len": "32", "head_dim": "16", "base": "500000", "format": "npy"}
    )
    posted.write_bytes(plain.content)
    missing = main_in_process("verify", str(posted), "--config", str(config), "--json")
    assert missing.returncode == 1
    mistakes = [each["mistake"] for each in json.loads(missing.stdout)["diagnoses"]]
    assert "scaling" in mistakes


def test_a_config_of_several_layer_types_asks_for_one(table: Path) -> None:
    gemma = ROOT / "tests" / "data" / "gemma-3-4b-it.config.json"
    done = main_in_process("verify", str(table), "--config", str(gemma))
    assert done.returncode == 2
    assert b"--param layer_type=" in done.stderr
    assert b"sliding_attention, full_attention" in done.stderr


def test_identify_names_the_get_and_exits_0(table: Path) -> None:
    done = main_in_process("identify", str(table))
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode()
    assert said.startswith("matched: yes")
    assert f"bitwise, largest difference 0: GET {ROTARY}?head_dim=8&" in said
    assert "base=10000" in said


def test_identify_of_noise_exits_1(tmp_path: Path) -> None:
    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).uniform(-1, 1, (16, 8)).astype(np.float32))
    done = main_in_process("identify", str(noise), "--json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["matched"] is False


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["verify", "TABLE"], b"give --family"),
        (["verify", "TABLE", "--family", "nope"], b"no family 'nope'"),
        (["verify", "TABLE", "--family", "rotary", "--param", "head_dim"], b"is not NAME=VALUE"),
        (["verify", "TABLE", "--family", "rotary", "--param", "family=rotary"], b"--family"),
        (["verify", "TABLE", "--family", "rotary", "--param", "head_dim=9"], b"422: head_dim"),
        (["verify", "missing.npy", "--family", "rotary"], b"cannot read missing.npy"),
        (["identify", "TABLE", "--start", "-1"], b"start"),
        (["identify", "TABLE", "--start", "x"], b"invalid int value"),
    ],
)
def test_what_it_cannot_take_exits_2_and_says_why(
    table: Path, tmp_path: Path, argv: list[str], said: bytes
) -> None:
    done = main_in_process(
        *(str(table) if each == "TABLE" else each for each in argv), cwd=tmp_path
    )
    assert done.returncode == 2
    assert said in done.stderr
    assert not done.stdout


def test_the_format_is_the_suffix_or_the_first_bytes() -> None:
    npy = io.BytesIO()
    np.save(npy, np.zeros((1, 2), np.float32))
    assert checking.format_of(Path("t.safetensors"), npy.getvalue()) == "safetensors"
    for body, fmt in ((npy.getvalue(), "npy"), (b"PK\x03\x04", "npz"), (b' {"data"', "json")):
        assert checking.format_of(None, body) == fmt
    assert checking.format_of(None, b"\x10\x00\x00\x00\x00\x00\x00\x00{") == "safetensors"


@pytest.mark.slow
def test_the_command_reads_standard_input(table: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service", "identify", "-"],
        input=table.read_bytes(),
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"matched: yes")

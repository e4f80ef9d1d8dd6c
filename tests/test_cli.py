"""The command line: ``--help`` starts nothing, and ``export`` writes, without a server,
the bytes the HTTP answer holds for the same parameters (from-config included)."""

from __future__ import annotations

import asyncio
import io
import os
import resource
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from service import cli
from service.settings import Settings
from tests.support import ROOT, TABLE, client_of, main_in_process

CONFIG = {
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "hidden_size": 256,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "service", *argv], capture_output=True, cwd=cwd, timeout=60
    )


# A test of the command line runs it twice: as a real process, among the slow tests (an
# interpreter's start and the service's imports, each time), and by its ``main`` in this
# process (``main_in_process``), in the fast loop.
Run = Callable[..., subprocess.CompletedProcess[bytes]]


@pytest.mark.slow
def test_help_prints_usage_and_starts_nothing() -> None:
    assert_help_prints_usage_and_starts_nothing(run)


def test_main_prints_usage_and_starts_nothing() -> None:
    assert_help_prints_usage_and_starts_nothing(main_in_process)


def assert_help_prints_usage_and_starts_nothing(run: Run) -> None:
    done = run("--help")
    assert done.returncode == 0
    assert b"usage: python -m service" in done.stdout
    for command in (b"serve", b"openapi", b"export"):
        assert command in done.stdout
    assert b"Uvicorn running" not in done.stderr
    export = run("export", "--help")
    assert export.returncode == 0
    assert b"without a server" in export.stdout
    assert run("bogus").returncode == 2


@pytest.mark.parametrize(
    ("family", "fmt", "parameters", "path"),
    [
        ("sinusoidal", "npy", {"max_len": "40", "d_model": "6", "preset": "fairseq"}, None),
        (
            "rotary",
            "npz",
            {"max_len": "16", "head_dim": "8", "scaling": "linear", "factor": "2"},
            None,
        ),
        ("rotary", "json", {"max_len": "4", "head_dim": "4", "start": "1"}, None),
        ("alibi", "raw", {"num_heads": "3", "max_len": "5"}, "/v1/biases/alibi"),
        ("alibi-slopes", "safetensors", {"num_heads": "12"}, "/v1/biases/alibi/slopes"),
        ("timestep", "npy", {"max_len": "1000", "dim": "320", "preset": "unet"}, None),
        # Qwen2.5-VL-7B's vision tower over 4 x 4 patches (56 x 56 pixels)
        ("vision-rotary", "npz", {"model": "qwen2_5_vl", "grid": "1,4,4"}, None),
        ("vision-rotary", "json", {"model": "llama4", "height": "3", "width": "3"}, None),
    ],
)
def test_an_export_is_the_http_answer(
    http: httpx.Client, family: str, fmt: str, parameters: dict[str, Any], path: str | None
) -> None:
    exported = cli.export(family, parameters, fmt=fmt)
    url = path or f"/v1/encodings/{family}"
    answer = http.get(
        url, params={**parameters, "format": fmt}, headers={"accept-encoding": "identity"}
    )
    assert answer.status_code == 200
    assert exported == answer.content


def test_an_export_from_a_config_is_the_from_config_answer(http: httpx.Client) -> None:
    body = orjson.dumps(CONFIG)
    exported = cli.export("rotary", {"start": 60}, fmt="safetensors", config=CONFIG)
    answer = http.post(
        "/v1/encodings/rotary/from-config?format=safetensors&start=60",
        content=body,
        headers={"content-type": "application/json", "accept-encoding": "identity"},
    )
    assert exported == answer.content
    assert cli.export("rotary", {"start": 60, "format": "safetensors"}, config=body) == exported


def test_a_refused_export_says_why() -> None:
    with pytest.raises(cli.ExportError, match="head_dim") as caught:
        cli.export("rotary", {"max_len": 8, "head_dim": 7})
    assert caught.value.status == 422
    with pytest.raises(cli.ExportError, match="no family 'rope'"):
        cli.export("rope", {"max_len": 8})


@pytest.mark.slow
def test_the_command_writes_its_file(tmp_path: Path, http: httpx.Client) -> None:
    assert_the_command_writes_its_file(run, tmp_path, http)


def test_main_writes_its_file(tmp_path: Path, http: httpx.Client) -> None:
    assert_the_command_writes_its_file(main_in_process, tmp_path, http)


def assert_the_command_writes_its_file(run: Run, tmp_path: Path, http: httpx.Client) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps(CONFIG))
    out = tmp_path / "rope.npz"  # the format from the suffix
    done = run("export", "rotary", "--config", str(config), "-o", str(out))
    assert done.returncode == 0, done.stderr
    answer = http.post(
        "/v1/encodings/rotary/from-config?format=npz",
        content=config.read_bytes(),
        headers={"content-type": "application/json"},
    )
    assert out.read_bytes() == answer.content
    refused = run("export", "sinusoidal", "max_len=0", "d_model=4")
    assert refused.returncode == 1
    assert refused.stderr.startswith(b"export: 422: max_len")
    assert run("export", "sinusoidal", "max_len").returncode == 2


def test_an_older_python_is_refused_in_one_line() -> None:
    """Before anything written for 3.11 is imported (the interpreter's version made to read
    3.10 here, as this machine has no older Python)."""
    code = "import sys; sys.version_info = (3, 10, 12, 'final', 0); import service"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "the service needs Python 3.11 or newer; this is Python 3.10.12"
    ]


def test_an_export_takes_any_parameter_name_and_one_format() -> None:
    """Parameters travel as one mapping: a name such as ``config`` reaches the service
    (which refuses it as it refuses it over HTTP); ``format`` among them is the format."""
    with pytest.raises(cli.ExportError, match="config: is not a parameter"):
        cli.export("sinusoidal", {"max_len": 4, "d_model": 8, "config": "x"})
    as_json = cli.export("sinusoidal", {"max_len": 2, "d_model": 2, "format": "json"})
    assert orjson.loads(as_json)["shape"] == [2, 2]
    with pytest.raises(cli.ExportError, match="format: give it once"):
        cli.export("sinusoidal", {"max_len": 2, "d_model": 2, "format": "json"}, fmt="npy")


def test_an_export_runs_beside_an_event_loop_and_takes_no_port(http: httpx.Client) -> None:
    """From a notebook (an event loop running), with the gRPC port of a running service."""
    expected = http.get("/v1/encodings/sinusoidal?max_len=4&d_model=4&format=npy").content

    async def inside(port: int) -> bytes:
        settings = Settings(grpc_port=port, preload="not a table")
        return cli.export("sinusoidal", {"max_len": 4, "d_model": 4}, settings=settings)

    with socket.socket() as held:  # the port a running service's gRPC server holds
        held.bind(("127.0.0.1", 0))
        held.listen()
        assert asyncio.run(inside(held.getsockname()[1])) == expected


@pytest.mark.slow
def test_a_command_line_it_cannot_use_is_one_line(tmp_path: Path) -> None:
    assert_a_command_line_it_cannot_use_is_one_line(run, tmp_path)


def test_main_says_in_one_line_what_it_cannot_use(tmp_path: Path) -> None:
    assert_a_command_line_it_cannot_use_is_one_line(main_in_process, tmp_path)


def assert_a_command_line_it_cannot_use_is_one_line(run: Run, tmp_path: Path) -> None:
    repeated = run("export", "sinusoidal", "max_len=4", "max_len=5", "d_model=4")
    assert repeated.returncode == 2
    assert b"is given twice" in repeated.stderr
    unknown = run("export", "sinusoidal", "max_len=4", "d_model=4", "-o", str(tmp_path / "t.bin"))
    assert unknown.returncode == 2
    assert b"give --format" in unknown.stderr
    missing = run("export", "rotary", "--config", str(tmp_path / "none.json"), "-o", "x.npz")
    assert missing.returncode == 1
    assert missing.stderr.decode().strip().endswith("No such file or directory")


@pytest.mark.slow
def test_an_audit_is_exported(tmp_path: Path, http: httpx.Client) -> None:
    """``--audit`` writes the table's precision audit: the answer of GET /v1/audit/FAMILY."""
    assert_an_audit_is_exported(run, tmp_path, http)


def test_main_exports_an_audit(tmp_path: Path, http: httpx.Client) -> None:
    assert_an_audit_is_exported(main_in_process, tmp_path, http)


def assert_an_audit_is_exported(run: Run, tmp_path: Path, http: httpx.Client) -> None:
    parameters: dict[str, str | int] = {
        "max_len": 4096,
        "head_dim": 64,
        "paths": "library,bf16-positions",
    }
    document = cli.export("rotary", parameters, audit=True)
    assert document == http.get("/v1/audit/rotary", params=parameters).content
    assert orjson.loads(document)["paths"][1]["first_over"]["1e-3"] == 257
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps(CONFIG))
    out = tmp_path / "audit.json"
    done = run("export", "rotary", "--config", str(config), "--audit", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert orjson.loads(out.read_bytes())["paths"][0]["name"] == "library"
    picture = tmp_path / "audit.png"
    assert (
        run(
            "export", "rotary", "max_len=64", "head_dim=8", "--audit", "-o", str(picture)
        ).returncode
        == 0
    )
    assert picture.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(cli.ExportError, match="format"):
        cli.export("rotary", {"max_len": 8, "head_dim": 8}, fmt="npy", audit=True)
    with pytest.raises(cli.ExportError, match="no family 'alibi-slopes'"):
        cli.export("alibi-slopes", {"num_heads": 8}, audit=True)  # slopes alone: no audit


BLOCKWISE = [
    pytest.param("sinusoidal", {"max_len": 100, "d_model": 12}, id="sinusoidal"),
    pytest.param(
        "sinusoidal",
        {"max_len": 100, "d_model": 12, "start": 7, "stop": 93, "dim_start": 3, "dim_stop": 11},
        id="sinusoidal-sliced",
    ),
    pytest.param("sinusoidal", {"max_len": 97, "d_model": 5, "dtype": "float16"}, id="odd"),
    pytest.param("rotary", {"max_len": 100, "head_dim": 8}, id="rotary"),
    pytest.param(
        "rotary",
        {"max_len": 90, "head_dim": 16, "start": 11, "stop": 80},
        id="rotary-sliced",
    ),
    pytest.param(
        "rotary",
        {"max_len": 64, "head_dim": 8, "scaling": "yarn", "factor": 4}
        | {"original_max_position_embeddings": 16, "dtype": "float64"},
        id="rotary-yarn",
    ),
    pytest.param("temperature", {"max_len": 70, "floor_scale": 8}, id="temperature"),
]


@pytest.mark.parametrize(("family", "parameters"), BLOCKWISE)
# every family written as npy in the fast loop, as raw too in the full run
@pytest.mark.parametrize("fmt", ["npy", pytest.param("raw", marks=pytest.mark.slow)])
def test_a_table_written_a_block_of_rows_at_a_time_is_the_whole_answer(
    http: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    parameters: dict[str, Any],
    fmt: str,
) -> None:
    """A table of rows, as .npy or raw, is asked 4 MiB of rows at a time (here 160 bytes:
    blocks of a few rows, the last one shorter): the file is byte for byte the whole
    answer, a table of several arrays (rotary's, stacked) included."""
    url = f"/v1/encodings/{family}"
    whole = http.get(url, params={**parameters, "format": fmt}).content
    asked: list[str] = []
    monkeypatch.setattr("service.exporting.BLOCK_BYTES", 160)
    counting(monkeypatch, asked)
    out = io.BytesIO()
    cli.export_to(out, family, parameters, fmt=fmt)
    assert out.getvalue() == whole
    assert len(asked) >= 3  # the whole asked once (a 304), then its blocks
    assert f"format={fmt}" in asked[0].split("&")
    assert all("format=raw" in each.split("&") for each in asked[1:])


def counting(monkeypatch: pytest.MonkeyPatch, asked: list[str]) -> None:
    """Each query the export asks of the app, noted in ``asked``."""
    from service.server import inprocess

    request = inprocess.request

    async def noting(app: Any, method: str, path: str, query: dict[str, str], *rest: Any) -> Any:
        asked.append(urllib.parse.urlencode(query))
        return await request(app, method, path, query, *rest)

    monkeypatch.setattr(inprocess, "request", noting)


def test_a_table_written_in_blocks_keeps_the_whole_tables_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each block is within them; the whole, asked first, is not: refused, nothing asked
    of its blocks."""
    monkeypatch.setattr("service.exporting.BLOCK_BYTES", 160)
    asked: list[str] = []
    counting(monkeypatch, asked)
    with pytest.raises(cli.ExportError, match="PE_MAX_ELEMENTS") as refused:
        cli.export(
            "sinusoidal", {"max_len": 100, "d_model": 12}, settings=Settings(max_elements=1000)
        )
    assert refused.value.status == 422
    assert len(asked) == 1


def test_a_table_of_arrays_to_standard_output_is_asked_whole(
    monkeypatch: pytest.MonkeyPatch, http: httpx.Client
) -> None:
    """Its arrays' rows go to places apart: only a file that can seek takes them a block at
    a time; standard output gets the whole answer."""
    parameters = {"max_len": 32, "head_dim": 8}
    monkeypatch.setattr("service.exporting.BLOCK_BYTES", 160)
    asked: list[str] = []
    counting(monkeypatch, asked)

    class Pipe(io.BytesIO):
        def seekable(self) -> bool:
            return False

    out = Pipe()
    cli.export_to(out, "rotary", parameters, fmt="npy")
    assert (
        out.getvalue() == http.get("/v1/encodings/rotary?max_len=32&head_dim=8&format=npy").content
    )
    assert len(asked) == 2  # the whole request's checks (a 304), then the whole


def test_an_export_to_a_file_it_cannot_write_says_which_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line naming the path and the system's reason, where the file cannot be made
    (its parent is a file) or written (``/dev/full``: no name in the error, which printed
    ``export: None: ...``)."""
    (tmp_path / "file").write_bytes(b"")
    table = ["export", "sinusoidal", "max_len=4", "d_model=4"]
    for path, why in [
        (Path("/dev/full"), "No space left on device"),
        (tmp_path / "file" / "pe.npy", "Not a directory"),
        (tmp_path, "Is a directory"),
    ]:
        assert (
            cli.run_export(cli.command([*table, "-o", str(path), "--format=npy"]), Settings()) == 1
        )
        assert capsys.readouterr().err == f"export: cannot write {path}: {why}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing left beside it


def test_an_export_replaces_a_file_whole_and_keeps_its_mode_and_links(
    tmp_path: Path, http: httpx.Client
) -> None:
    expected = http.get(f"{TABLE}?max_len=8&d_model=4&format=npy").content
    old = tmp_path / "pe.npy"
    old.write_bytes(b"old")
    old.chmod(0o640)
    link = tmp_path / "link.npy"
    link.symlink_to(old)
    arguments = cli.command(["export", "sinusoidal", "max_len=8", "d_model=4", "-o", str(link)])
    assert cli.run_export(arguments, Settings()) == 0
    assert link.is_symlink()
    assert old.read_bytes() == expected
    assert old.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.npy", "pe.npy"]
    refused = cli.command(["export", "sinusoidal", "max_len=0", "d_model=4", "-o", str(old)])
    assert cli.run_export(refused, Settings()) == 1
    assert old.read_bytes() == expected


def without_room(limit: int) -> Callable[[], None]:
    """For a child process: files may not grow past ``limit`` bytes (``EFBIG`` on the write
    that would pass it, as a full disk fails a write), rather than be killed by SIGXFSZ."""

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


@pytest.mark.slow
def test_an_export_that_fails_as_it_writes_leaves_the_old_file(tmp_path: Path) -> None:
    """The file was truncated before the new table was written: a write that failed
    halfway (a full disk) left half a table where the old one was."""
    old = tmp_path / "pe.npy"
    old.write_bytes(b"the old table")
    table = ["export", "sinusoidal", "max_len=1024", "d_model=1024", "-o", str(old)]
    done = subprocess.run(
        [sys.executable, "-m", "service", *table],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        preexec_fn=without_room(1 << 20),  # the table is 4 MiB
    )
    assert done.returncode == 1
    assert old.read_bytes() == b"the old table"
    assert [p.name for p in tmp_path.iterdir()] == ["pe.npy"]
    assert done.stderr.decode() == f"export: cannot write {old}: File too large\n"


@pytest.mark.slow
def test_an_export_to_dash_is_standard_output(tmp_path: Path) -> None:
    """``-o -`` wrote a file named ``-``; it is standard output, as Unix tools have it."""
    done = run("export", "sinusoidal", "max_len=64", "d_model=8", "-o", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = np.load(io.BytesIO(done.stdout), allow_pickle=False)
    assert table.shape == (64, 8)
    assert not any(tmp_path.iterdir())
    picture = run(
        "export", "rotary", "max_len=64", "head_dim=8", "--audit", "--format=png", "-o", "-"
    )
    assert picture.stdout.startswith(b"\x89PNG")


def peak_mib(argv: list[str]) -> float:
    """The peak resident memory of ``python -m service ARGV``, once it has exited 0."""
    process = subprocess.Popen([sys.executable, "-m", "service", *argv], cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0
    return usage.ru_maxrss / 1024  # KiB


# the allocator, and what the first request imports
SLACK_MIB = 24
# a block of rows (exporting.BLOCK_BYTES, 4 MiB), the raw answer, its copy, and the
# computation's own arrays, whatever the table's size
BLOCKWISE_MIB = 64
WIDE = ["sinusoidal", "max_len=16384", "d_model=1024"]  # 64 MiB of float32
ONE = ["sinusoidal", "max_len=1", "d_model=2"]
LONG = ["sinusoidal", "max_len=65536", "d_model=1024"]  # 256 MiB
ROTARY = ["rotary", "max_len=8192", "head_dim=1024"]  # cos and sin, 64 MiB
ROTARY_ONE = ["rotary", "max_len=1", "head_dim=2"]
# rotary's tables from a config, 64 MiB: from-config is asked whole
CONFIG_64 = {"rope_theta": 10000, "head_dim": 1024, "num_attention_heads": 8}
CONFIG_64 |= {"hidden_size": 8192, "max_position_embeddings": 8192}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("table", "tiny", "suffix", "bound"),
    [
        # a block at a time: tables of 256 MiB
        pytest.param(LONG, ONE, "npy", 0, id="npy"),
        pytest.param(LONG, ONE, "raw", 0, id="raw"),
        pytest.param(["rotary", "max_len=32768", "head_dim=1024"], ROTARY_ONE, "npy", 0, id="rope"),
        # whole: the rows (or the block computed) and the encoded answer, as the service
        pytest.param(["sinusoidal", "max_len=2048", "d_model=1024"], ONE, "json", 2, id="json"),
        pytest.param(["alibi", "num_heads=16", "max_len=1024"], ONE, "npy", 2, id="alibi"),
        # the rows, each array joined (or both stacked), the file
        pytest.param(ROTARY, ROTARY_ONE, "npz", 3, id="rotary-npz"),
        pytest.param(["rotary", "--config", "CONFIG"], ROTARY_ONE, "npy", 3, id="from-config"),
        # the rows, the safetensors package's copies
        pytest.param(WIDE, ONE, "safetensors", 4, id="safetensors"),
    ],
)
def test_an_export_holds_a_block_or_what_the_service_would(
    tmp_path: Path, table: list[str], tiny: list[str], suffix: str, bound: int
) -> None:
    """A 512 MiB table took 3.2 GB: the answer was kept in pieces, joined, copied into a
    response and its content. A table of rows as .npy or raw is now written a block of rows
    at a time; any other answer goes to the file a piece at a time as the app sends it,
    holding what the service holds to answer it (docs/settings.md, Memory)."""
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps(CONFIG_64))
    out = tmp_path / f"out.{suffix}"
    idle = peak_mib(["export", *tiny, "-o", str(out)])
    peak = peak_mib(
        ["export", *[str(config) if a == "CONFIG" else a for a in table], "-o", str(out)]
    )
    size = out.stat().st_size / (1 << 20)
    assert size >= 20
    limit = bound * size + SLACK_MIB if bound else BLOCKWISE_MIB
    assert peak - idle <= limit, (peak - idle, size)

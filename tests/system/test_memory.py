"""What one request may hold while it is answered, as a documented multiple of its answer
or body (README, "Memory"): each against a fresh server process, from the peak of its
resident memory (VmHWM) over its idle memory. The pages a table request caches count."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support import APPLY, HEATMAP, ROTARY_APPLY, TABLE, WAIT, npy_bytes, rss_mib, serving

pytestmark = pytest.mark.slow

MiB = 1 << 20
# the allocator, the first request's imports and buffers of the framework
SLACK = 24


def peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) / 1024  # type: ignore[index]


POSITIONS = "/v1/encodings/rotary/positions"
MROPE = "/v1/positions/mrope"
# 8 MiB of position ids as uint8: a 128 MiB answer of float32 rows, each id's 4 numbers
# (head_dim 2), or with M-RoPE a third as many ids of 12 (head_dim 6)
IDS = (np.arange(8 * MiB) % 251).astype(np.uint8)


def json_batch(rows: int, cols: int) -> bytes:
    row = b"[" + b",".join([b"0.5"] * cols) + b"]"
    return b'{"embeddings":[' + b",".join([row] * rows) + b"]}"


CASES = [
    # method, path, body and its type, the bound in MiB from the answer's and body's MiB
    pytest.param(
        "GET",
        f"{TABLE}?max_len=131072&d_model=128&format=npy",
        None,
        lambda answer, body: 2 * answer + SLACK,
        id="npy-table-64MiB",
    ),
    pytest.param(
        "GET",
        f"{TABLE}?max_len=131072&d_model=128&format=safetensors",
        None,
        # its rows, the whole array the library takes, the library's buffer and its bytes
        lambda answer, body: 4 * answer + SLACK,
        id="safetensors-table-64MiB",
    ),
    pytest.param(
        "GET",
        f"{TABLE}?max_len=16384&d_model=128&format=json",
        None,
        lambda answer, body: 2 * answer + SLACK,
        id="json-table-2M-numbers",
    ),
    pytest.param(
        "POST",
        APPLY,
        (npy_bytes(np.ones((64, 256, 512), np.float16)), "application/x-npy"),
        lambda answer, body: 4 * body + SLACK,
        id="npy-apply-float16-16MiB",
    ),
    pytest.param(
        "POST",
        ROTARY_APPLY,
        (npy_bytes(np.ones((128, 256, 512), np.float16)), "application/x-npy"),
        # rotated where it lies, a chunk at a time: 5.1 x its body when a float32 copy,
        # its float16 rounding and the answer's bytes were held at once
        lambda answer, body: 4 * body + SLACK,
        id="npy-rotary-apply-float16-32MiB",
    ),
    pytest.param(
        "POST",
        ROTARY_APPLY,
        (npy_bytes(np.ones((16384, 1024), np.float16)), "application/x-npy"),
        # one long sequence: the rows of its positions (8 bytes x rotary_dim a position,
        # cached) are 4 x the body, and were joined into a copy too (14.6 x the body)
        lambda answer, body: 4 * body + 8 * 16384 * 1024 / MiB + SLACK,
        id="npy-rotary-apply-float16-one-sequence-32MiB",
    ),
    pytest.param(
        "POST",
        f"{APPLY}?format=json",
        (json_batch(4096, 512), "application/json"),
        lambda answer, body: 72 * 4096 * 512 / MiB + SLACK,
        id="json-apply-2M-numbers",
    ),
    pytest.param(
        "POST",
        f"{POSITIONS}?max_len=256&head_dim=2&format=npy",
        (npy_bytes(IDS), "application/x-npy"),
        # the rows, then their bytes; the ids a chunk at a time (the whole ids as int64,
        # their np.unique, the rows' copies and a stacked copy made it 3.6 x: 57 x the body)
        lambda answer, body: 2 * answer + body + SLACK,
        id="npy-rotary-positions-8MiB-of-uint8-ids",
    ),
    pytest.param(
        "POST",
        f"{POSITIONS}?max_len=256&head_dim=6&mrope_section=1,1,1&format=npy",
        (npy_bytes(IDS[: len(IDS) // 3 * 3].reshape(3, -1)), "application/x-npy"),
        # each axis's rows were computed for all the ids at once, and their angles with them
        lambda answer, body: 2 * answer + body + SLACK,
        id="npy-m-rope-positions-8MiB-of-uint8-ids",
    ),
    pytest.param(
        "POST",
        f"{POSITIONS}?max_len=256&head_dim=2&format=safetensors",
        (npy_bytes(IDS), "application/x-npy"),
        # the rows, the library's buffer and its bytes
        lambda answer, body: 3 * answer + body + SLACK,
        id="safetensors-rotary-positions-8MiB-of-uint8-ids",
    ),
    pytest.param(
        "POST",
        f"{POSITIONS}?max_len=256&head_dim=2&format=json",
        (npy_bytes(IDS[: 1 << 19]), "application/x-npy"),
        # PE_MAX_JSON_ELEMENTS' 2M numbers: the rows, and orjson's buffer as it grows
        lambda answer, body: 4 * answer + SLACK,
        id="json-rotary-positions-2M-numbers",
    ),
    pytest.param(
        "POST",
        f"{MROPE}?format=npy",
        (b'{"segments": [{"text": 5592405}]}', "application/json"),
        # the (3, L) int64 ids, then their bytes
        lambda answer, body: 2 * answer + SLACK,
        id="npy-m-rope-layout-128MiB",
    ),
    pytest.param(
        "GET",
        f"{HEATMAP}?max_len=131072&d_model=128&width=2048&height=2048",
        None,
        # 64 bytes a pixel, the rows it reads (64 MiB), matplotlib itself (about 42 MiB)
        lambda answer, body: 64 * 2048 * 2048 / MiB + 64 + 48 + SLACK,
        id="heatmap-2048x2048-of-64MiB",
    ),
    pytest.param(
        "GET",
        "/v1/audit/temperature?max_len=2147483647",
        None,
        # a few chunks of 2^18 entries and its bands' samples, whatever its positions (the
        # plan of 2^21 positions and their union were held whole: +248 MiB)
        lambda answer, body: 32 + SLACK,
        id="audit-of-2^21-positions",
    ),
    pytest.param(
        "GET",
        "/v1/audit/sinusoidal?max_len=512&d_model=65536&paths=library",
        None,
        # rows of 65,536 entries, within the audit's limit: each path's matrix was held
        # whole with its temporaries (+1315 MiB)
        lambda answer, body: 32 + SLACK,
        id="audit-of-wide-rows",
    ),
    pytest.param(
        "GET",
        "/v1/audit/rotary?max_len=131072&head_dim=128&base=500000&format=png",
        None,
        # and matplotlib itself (about 42 MiB)
        lambda answer, body: 32 + 48 + SLACK,
        id="audit-png",
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "bound"), CASES)
def test_a_request_holds_at_most_a_documented_multiple(
    method: str, path: str, body: tuple[bytes, str] | None, bound: Callable[[float, float], float]
) -> None:
    with (
        serving({"PE_LOG_LEVEL": "warning"}) as (url, process),
        httpx.Client(base_url=url, timeout=WAIT) as client,
    ):
        client.get(f"{TABLE}?max_len=2&d_model=2")  # the first request's imports
        idle = rss_mib(process.pid)
        if body is None:
            response = client.get(path, headers={"accept-encoding": "identity"})
        else:
            response = client.post(path, content=body[0], headers={"content-type": body[1]})
        assert response.status_code == 200
        held = peak_mib(process.pid) - idle
    answer, sent = len(response.content) / MiB, len(body[0]) / MiB if body else 0.0
    limit = bound(answer, sent)
    print(f"\n{path[:60]}: answer {answer:.1f} MiB, body {sent:.1f} MiB, peak +{held:.0f} MiB")
    assert held <= limit

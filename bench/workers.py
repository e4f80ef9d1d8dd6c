"""How throughput scales from one worker process to two (``PE_WORKERS``) on this machine:
two services side by side on loopback, one with each, driven by wrk in interleaved rounds
(a round runs every case against both), for cases bound by computation (cold tables,
apply) and a cached one.

    .venv/bin/python -m bench.workers [--rounds 3] [--seconds 4]

Needs wrk (a Debian package). wrk itself runs on the same cores as the servers it drives,
as any client on this machine does: the cached case's ratio includes its share.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np

from bench.run import TABLE, Target, free_port, post_script, service, wait_for, wrk

COLD = """counter = 0
request = function()
    counter = counter + 1
    local base = string.format("%.3f", 10000 + counter / 1000 + {offset})
    return wrk.format("GET", "{path}&base=" .. base)
end
"""


def cold_script(root: Path, name: str, path: str, offset: int) -> Path:
    """A wrk script asking for a new table each request (a new base: nothing is kept)."""
    script = root / f"{name}.lua"
    script.write_text(COLD.replace("{offset}", str(offset)).replace("{path}", path))
    return script


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is needed: apt-get install wrk")
    root = Path(tempfile.mkdtemp(prefix="pe-bench-workers-"))
    body = io.BytesIO()
    np.save(body, np.random.default_rng(0).standard_normal((8, 512, 512)).astype(np.float32))
    apply = post_script(root, "apply", body.getvalue(), "application/x-npy")
    cold = f"{TABLE}?max_len=2048&d_model=512&format=npy"
    cached = f"{TABLE}?max_len=512&d_model=512&format=npy"
    small = f"{TABLE}?max_len=16&d_model=64"
    ports = {workers: free_port() for workers in (1, 2)}
    url = {workers: f"http://127.0.0.1:{port}" for workers, port in ports.items()}
    cases: dict[str, dict[int, Target]] = {
        "cold tables, 2048 x 512 float32 .npy (4 MiB), a new one each request": {
            w: Target(f"{w}", url[w] + cold, script=cold_script(root, f"cold{w}", cold, w * 500))
            for w in ports
        },
        "apply, (8, 512, 512) float32 .npy (8 MiB) in and out": {
            w: Target(f"{w}", url[w] + "/v1/encodings/sinusoidal/apply", script=apply)
            for w in ports
        },
        "cached table, 512 x 512 float32 .npy (1 MiB)": {
            w: Target(f"{w}", url[w] + cached) for w in ports
        },
        "cached slice, 16 x 64 JSON (a small answer)": {
            w: Target(f"{w}", url[w] + small) for w in ports
        },
    }
    with contextlib.ExitStack() as stack:
        for workers, port in ports.items():
            stack.enter_context(service(port, PE_WORKERS=str(workers), PE_LOG_LEVEL="warning"))
        for workers in ports:
            wait_for(url[workers] + "/readyz")
            for _ in range(8):  # every worker computes the cached tables before timing
                with httpx.Client(timeout=30) as http:
                    http.get(url[workers] + cached).raise_for_status()
                    http.get(url[workers] + small).raise_for_status()
        for _ in range(args.rounds):
            for targets in cases.values():
                for target in targets.values():
                    target.runs.append(wrk(target, args.seconds))
                    target.settle()
    print(f"PE_WORKERS 1 -> 2, wrk -t1 -c16, {args.rounds} rounds of {args.seconds} s, medians")
    print()
    print("| case | 1 worker: req/s, answer MB/s | 2 workers: req/s, answer MB/s | 2 / 1 |")
    print("|---|---|---|---|")
    for name, targets in cases.items():
        one, two = (targets[w].median() for w in (1, 2))
        print(
            f"| {name} | {one.rps:,.1f}, {one.mbps:,.0f} | {two.rps:,.1f}, {two.mbps:,.0f} "
            f"| {two.rps / one.rps:.2f} |"
        )


if __name__ == "__main__":
    main()

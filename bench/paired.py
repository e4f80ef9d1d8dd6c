"""The service at another revision against this checkout, side by side on loopback, wrk
taking turns between them (the order alternating every round, as the second of a pair
runs on a warmer machine), for one request: has a change made it slower?

    .venv/bin/python -m bench.paired REV [--path /v1/...] [--rounds 8] [--seconds 5] [--304]

REV is checked out in a temporary git worktree and run with this environment's packages.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.run import ROOT, Target, free_port, service, wait_for, wrk


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="pe-paired-") as parent:
        path = Path(parent) / "tree"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(path), rev], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("rev")
    parser.add_argument("--path", default="/v1/encodings/sinusoidal?max_len=16&d_model=64")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument(
        "--304", dest="conditional", action="store_true", help="ask with If-None-Match: the 304"
    )
    args = parser.parse_args()
    with worktree(args.rev) as other, contextlib.ExitStack() as stack:
        targets = {}
        for name, tree in ((args.rev, other), ("this checkout", ROOT)):
            port = free_port()
            settings = {"PE_LOG_LEVEL": "warning", "PYTHONPATH": str(tree)}
            stack.enter_context(service(port, cwd=tree, **settings))
            base = f"http://127.0.0.1:{port}"
            wait_for(base + "/readyz")
            url = base + args.path
            wrk(Target(name, url), 1)  # warm: the answer kept for wrk's requests
            etag = httpx.get(url).headers["etag"] if args.conditional else None
            targets[name] = Target(name, url, {"If-None-Match": etag} if etag else {})
        for i in range(args.rounds):
            order = list(targets.values())
            for target in order if i % 2 else order[::-1]:
                target.runs.append(wrk(target, args.seconds))
    rates = {name: target.median().rps for name, target in targets.items()}
    for name, target in targets.items():
        runs = ", ".join(f"{r.rps:,.0f}" for r in target.runs)
        print(f"{name}: median {rates[name]:,.0f} requests/s ({runs})")
    print(f"this checkout / {args.rev} = {rates['this checkout'] / rates[args.rev]:.3f}")


if __name__ == "__main__":
    main()

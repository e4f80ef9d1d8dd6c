"""The replayed slice against a bare ASGI app sending the same bytes: what every layer in
front of the replay costs a request.

    .venv/bin/python bench/replay.py [--tree PATH ...] [--rounds 5] [--wrk SECONDS]
    .venv/bin/python bench/replay.py --profile [--requests 20000]

In process (the default): for each tree (this checkout unless ``--tree`` names others,
each run in its own interpreter with that tree first on ``PYTHONPATH``), requests of the
cached 8-row slice (``bench/run.py``'s "cached slice 8 x 512") go through uvicorn's
httptools protocol on a transport that writes nowhere, the service's (its bounded protocol
and the app as uvicorn loads it) and the bare app's (``bench/baselines``) taking turns,
12 turns of ``--requests`` each. Each is timed by the process's CPU time and its fastest
turn kept, the one least disturbed by other work on the machine; printed: the service's
requests per second as a fraction of the bare app's, the median over ``--rounds``
interpreters. ``--profile`` prints cProfile's top functions of the service's requests
instead.

With ``--wrk SECONDS``: each tree's service and the bare app served on loopback (uvicorn,
one worker), wrk taking turns between them as ``bench/run.py`` drives them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PATH = "/v1/encodings/sinusoidal?max_len=512&d_model=512&stop=8&format=npy"


class _Nowhere:
    """A transport that takes every write at once, as a client reading fast would."""

    def __init__(self) -> None:
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def can_write_eof(self) -> bool:
        return True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Connection:
    """One kept-alive connection of uvicorn's protocol to ``config``'s app."""

    def __init__(self, config: Any, state: Any) -> None:
        from uvicorn.server import ServerState

        self.protocol = config.http_protocol_class(
            config=config, server_state=ServerState(), app_state=state
        )
        self.transport = _Nowhere()
        self.protocol.connection_made(self.transport)
        self.done: asyncio.Future[None] | None = None
        complete = self.protocol.on_response_complete

        def on_response_complete() -> None:
            complete()
            if self.done is not None:
                self.done.set_result(None)

        self.protocol.on_response_complete = on_response_complete

    async def get(self, request: bytes) -> None:
        self.done = asyncio.get_running_loop().create_future()
        self.protocol.data_received(request)
        await self.done


@contextlib.asynccontextmanager
async def _served(config: Any) -> Any:
    from uvicorn.lifespan.on import LifespanOn

    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    try:
        yield _Connection(config, lifespan.state)
    finally:
        await lifespan.shutdown()


def _request(path: str) -> bytes:
    # what wrk sends
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n".encode()


async def _in_process(requests: int, rounds: int, profile: bool) -> dict[str, Any]:
    import uvicorn

    # the access log on, written nowhere, as bench/run.py runs the service (PE_LOG_LEVEL
    # info); uvicorn's own access log off, as for every app there
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    service = uvicorn.Config(
        "service.app:create_app",
        factory=True,
        access_log=False,
        http="service.server.protocol:BoundedHttpToolsProtocol",
        log_config=None,
    )
    bare = uvicorn.Config("bench.baselines:bare", access_log=False, http="httptools")
    import logging

    logging.getLogger("service.access").setLevel(logging.INFO)
    mine, theirs = _request(PATH), _request("/slice")
    times: dict[str, list[float]] = {"service": [], "bare": []}
    async with _served(service) as served, _served(bare) as floor:
        await served.get(mine)  # kept for replay
        written = served.transport.written
        await served.get(mine)
        size = served.transport.written - written
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(requests):
                await served.get(mine)
            profiler.disable()
            out = pstats.Stats(profiler, stream=sys.stderr)
            out.sort_stats("tottime").print_stats(30)
            out.sort_stats("cumulative").print_stats(40)
            return {}
        for i in range(rounds):
            turns = [("service", served, mine), ("bare", floor, theirs)]
            for name, connection, request in turns if i % 2 else turns[::-1]:
                start = time.process_time()
                for _ in range(requests):
                    await connection.get(request)
                times[name].append(time.process_time() - start)
    # the fastest turn of each: the least disturbed by other work on the machine
    rps = {name: requests / min(spent) for name, spent in times.items()}
    return {"rps": rps, "ratio": rps["service"] / rps["bare"], "bytes": size}


def _spawn(tree: Path, argv: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, *argv], env=env, cwd=tree, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@contextlib.contextmanager
def _services(trees: list[Path]) -> Iterator[tuple[dict[str, Any], Callable[..., Any]]]:
    sys.path.insert(0, str(ROOT))
    from bench.run import Target, free_port, service, uvicorn_app, wait_for, wrk

    targets = {}
    with contextlib.ExitStack() as stack:
        for tree in trees:
            port = free_port()
            stack.enter_context(service(port, cwd=tree, PYTHONPATH=str(tree)))
            wait_for(f"http://127.0.0.1:{port}/readyz")
            targets[str(tree)] = Target(str(tree), f"http://127.0.0.1:{port}{PATH}")
        port = free_port()
        stack.enter_context(uvicorn_app("bench.baselines:bare", port))
        wait_for(f"http://127.0.0.1:{port}/")
        targets["bare ASGI"] = Target("bare ASGI", f"http://127.0.0.1:{port}/slice")
        yield targets, wrk


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, action="append", help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--wrk", type=int, metavar="SECONDS", help="over loopback, with wrk")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or args.profile:
        import uvloop  # the loop uvicorn serves on

        result = uvloop.run(_in_process(args.requests, args.rounds, args.profile))
        sys.__stdout__.write(json.dumps(result) + "\n")  # type: ignore[union-attr]
        return
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    if args.wrk:
        with _services(trees) as (targets, wrk):
            for target in targets.values():
                wrk(target, 1)  # warm: the answer kept
            for i in range(args.rounds):
                order = list(targets.values())
                for target in order if i % 2 else order[::-1]:
                    target.runs.append(wrk(target, args.wrk))
        bare = targets.pop("bare ASGI")
        for name, target in targets.items():
            ratios = [s.rps / b.rps for s, b in zip(target.runs, bare.runs, strict=True)]
            print(
                f"{name}: {target.median().rps:,.0f} req/s, bare ASGI {bare.median().rps:,.0f}: "
                f"{statistics.median(ratios):.3f}x (per round: "
                + ", ".join(f"{r:.3f}" for r in ratios)
                + ")"
            )
        return
    results: dict[str, list[dict[str, Any]]] = {str(tree): [] for tree in trees}
    for i in range(args.rounds):
        for tree in trees if i % 2 == 0 else trees[::-1]:
            child = ["--child", "--rounds", "12", "--requests", str(args.requests)]
            results[str(tree)].append(_spawn(tree, child))
    for name, runs in results.items():
        ratios = [run["ratio"] for run in runs]
        rps = statistics.median(run["rps"]["service"] for run in runs)
        bare = statistics.median(run["rps"]["bare"] for run in runs)
        print(
            f"{name}: in process {rps:,.0f} req/s, bare ASGI {bare:,.0f}: "
            f"{statistics.median(ratios):.3f}x (per round: "
            + ", ".join(f"{r:.3f}" for r in ratios)
            + f"; {runs[0]['bytes']} bytes an answer)"
        )


if __name__ == "__main__":
    main()

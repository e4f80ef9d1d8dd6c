"""The benchmark: the service and its baselines side by side on loopback, driven by wrk
in interleaved rounds, written to bench/RESULTS.md.

    .venv/bin/python bench/run.py [--rounds 3] [--seconds 4] [--no-profile]

Needs wrk and nginx (Debian packages) and py-spy (the ``bench`` extra) for the profiles.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import httpx
import numpy as np
import orjson

from bench import baselines
from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey

ROOT = Path(__file__).resolve().parents[1]
TABLE = "/v1/encodings/sinusoidal"
MiB = 1 << 20


@dataclass
class Run:
    rps: float
    p50_ms: float
    p99_ms: float
    mbps: float


@dataclass
class Target:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    script: Path | None = None
    runs: list[Run] = field(default_factory=list)

    def settle(self) -> None:
        """Wait until the server has finished what wrk left queued (slow applies)."""
        base = re.match(r"http://[^/]+", self.url)[0]  # type: ignore[index]
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(300):
                start = time.perf_counter()
                with contextlib.suppress(httpx.TransportError):
                    client.get("/healthz")
                if time.perf_counter() - start < 0.02:
                    return
                time.sleep(0.1)

    def median(self) -> Run:
        return Run(
            *(
                statistics.median(getattr(r, k) for r in self.runs)
                for k in ("rps", "p50_ms", "p99_ms", "mbps")
            )
        )


@dataclass
class Case:
    name: str
    service: Target
    baselines: list[Target]
    goal: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


@contextlib.contextmanager
def process(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def service(
    port: int, cwd: Path = ROOT, **settings: str
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    env = {"PE_HOST": "127.0.0.1", "PE_PORT": str(port), **settings}
    return process([sys.executable, "-m", "service"], env, cwd)


def uvicorn_app(app: str, port: int) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    argv = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    return process([*argv, "--no-access-log", "--log-level", "warning"])


@contextlib.contextmanager
def nginx_static(root: Path, port: int) -> Iterator[None]:
    conf = root / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(
        f"""{user}
worker_processes 1; daemon off; pid {root}/nginx.pid; error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off; sendfile on; tcp_nopush on;
    client_body_temp_path {root}/t1; proxy_temp_path {root}/t2; fastcgi_temp_path {root}/t3;
    uwsgi_temp_path {root}/t4; scgi_temp_path {root}/t5;
    types {{ application/x-npy npy; application/json json; }}
    server {{ listen 127.0.0.1:{port}; root {root}/files; }}
}}
"""
    )
    with process(["nginx", "-p", str(root), "-c", str(conf)]):
        yield


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}
SIZES = {"B": 1 / MiB, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def wrk(target: Target, seconds: int) -> Run:
    # wrk gets the last core to itself when it can, so that it does not share one with
    # the server it measures (the servers are left to the scheduler)
    pin = (
        ["taskset", "-c", str((os.cpu_count() or 1) - 1)]
        if shutil.which("taskset") and (os.cpu_count() or 1) > 1
        else []
    )
    argv = [*pin, "wrk", "-t1", "-c16", f"-d{seconds}s", "--latency"]
    for name, value in target.headers.items():
        argv += ["-H", f"{name}: {value}"]
    if target.script:
        argv += ["-s", str(target.script)]
    out = subprocess.run([*argv, target.url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
    transfer = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    mbps = float(transfer[1]) * SIZES[transfer[2]] * MiB / 1e6 if transfer else 0.0
    latency = {p: float(v) * UNITS[u] for p, v, u in re.findall(r"\s(50|99)%\s+([\d.]+)(\w+)", out)}
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{target.name}: {errors[1]} failed responses")
    return Run(rps, latency["50"], latency["99"], mbps)


def post_script(root: Path, name: str, body: bytes, content_type: str) -> Path:
    data = root / f"{name}.body"
    data.write_bytes(body)
    script = root / f"{name}.lua"
    script.write_text(
        f'wrk.method = "POST"\n'
        f'local f = io.open("{data}", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
        f'wrk.headers["Content-Type"] = "{content_type}"\n'
    )
    return script


def rss_mib(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text)[1]) / 1024  # type: ignore[index]


def timed_together(steps: list[Callable[[], object]], runs: int) -> tuple[float, ...]:
    """Median seconds of each step, the steps taking turns in every round so that each
    sees the same machine (a ratio between them is then fair)."""
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(runs):
        for step, spent in zip(steps, times, strict=True):
            start = time.perf_counter()
            step()
            spent.append(time.perf_counter() - start)
    return tuple(statistics.median(spent) for spent in times)


def numpy_floor() -> None:
    """The float64 vectorized table, as a careful numpy user writes it."""
    position = np.arange(8192, dtype=np.float64)[:, None]
    angle = position * 10000.0 ** (-np.arange(0, 1024, 2) / 1024)
    table = np.empty((8192, 1024), np.float32)
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle)


def cold_tables(url: str, runs: int) -> tuple[float, float, float]:
    """Median seconds: HTTP cold requests (a new base each), in-process core, numpy floor."""
    counter = iter(range(10**6))

    def http() -> None:
        base = 10000 + next(counter) / 1000
        response = httpx.get(
            f"{url}{TABLE}?max_len=8192&d_model=1024&base={base}&format=npy", timeout=60
        )
        response.raise_for_status()

    def in_process() -> None:
        registry.rows(SinusoidalKey(1024, 20000 + next(counter) / 1000), 0, 8192)

    over_http, in_process_s, floor = timed_together([http, in_process, numpy_floor], runs)
    return over_http, in_process_s, floor


def churn_rss(rounds: int, budget: int) -> tuple[float, float, int]:
    """Peak RSS (MiB) of a service with a small budget under distinct large tables and
    slices, its idle RSS, and the number of tables requested."""
    port = free_port()
    with service(port, PE_CACHE_BYTES=str(budget)) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_for(url + "/readyz")
        idle = rss_mib(proc.pid)
        peak = idle
        count = 0
        with httpx.Client(base_url=url, timeout=60) as client:
            for i in range(rounds):
                base = 100 + i
                client.get(
                    f"{TABLE}?max_len=8192&d_model=1024&base={base}&format=npy"
                ).raise_for_status()
                client.get(
                    f"{TABLE}?max_len=4096&d_model=512&base={base}&start=7&stop=99&format=json"
                ).raise_for_status()
                count += 2
                peak = max(peak, rss_mib(proc.pid))
        return peak, idle, count


def profile(pid: int, target: Target, seconds: int, out: Path) -> str:
    """Top functions by own samples while wrk drives ``target``."""
    raw = out.with_suffix(".txt")
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    wrk(target, seconds - 1)
    spy.wait(timeout=seconds + 30)
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        leaf = stack.split(";")[-1]
        leaf = re.sub(r" \(/.*/(site-packages|lib/python3\.\d+)/", " (", leaf)
        leaf = re.sub(r" \(" + re.escape(str(ROOT)) + "/", " (", leaf)
        own[leaf] = own.get(leaf, 0) + int(count)
        total += int(count)
    top = sorted(own.items(), key=lambda kv: -kv[1])[:12]
    return "\n".join(f"{100 * n / total:5.1f}%  {name}" for name, n in top)


def versions() -> str:
    def version(argv: list[str]) -> str:
        try:
            result = subprocess.run(argv, capture_output=True, text=True)
            return (result.stdout + result.stderr).strip().splitlines()[0]
        except (OSError, IndexError):
            return "not found"

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())[1]) / MiB  # type: ignore[index]
    packages = ", ".join(
        f"{name} {metadata.version(name)}"
        for name in ("numpy", "fastapi", "starlette", "uvicorn", "uvloop", "httptools", "orjson")
    )
    return (
        f"- machine: {os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, {platform.platform()}\n"
        f"- Python {platform.python_version()}; {packages}\n"
        f"- {version(['nginx', '-v'])}; {version(['wrk', '--version'])}\n"
        f"- load: wrk -t1 -c16 (one thread, 16 connections, pinned to the last core); the service and every baseline app run as one uvicorn worker"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed: apt-get install {tool}")

    root = Path(tempfile.mkdtemp(prefix="pe-bench-"))
    (root / "files").mkdir()
    for path, (body, _) in baselines.BODIES.items():
        suffix = {"/json": ".json"}.get(path, ".npy")
        (root / "files" / (path.strip("/") + suffix)).write_bytes(body)
    x_npy = np.random.default_rng(0).standard_normal((32, 256, 512)).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, x_npy)
    x_json = np.random.default_rng(1).standard_normal((8, 128, 512)).astype(np.float32)
    apply_npy = post_script(root, "apply-npy", buffer.getvalue(), "application/x-npy")
    apply_json = post_script(
        root,
        "apply-json",
        orjson.dumps({"embeddings": x_json}, option=orjson.OPT_SERIALIZE_NUMPY),
        "application/json",
    )

    ports = {
        name: free_port() for name in ("service", "constant", "bare", "naive", "minimal", "nginx")
    }
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    with contextlib.ExitStack() as stack:
        proc = stack.enter_context(service(ports["service"]))
        for name in ("constant", "bare", "naive", "minimal"):
            stack.enter_context(uvicorn_app(f"bench.baselines:{name}", ports[name]))
        stack.enter_context(nginx_static(root, ports["nginx"]))
        for name in ports:
            wait_for(url[name] + ("/readyz" if name == "service" else "/"))
        idle = rss_mib(proc.pid)

        table = f"{url['service']}{TABLE}?max_len=512&d_model=512"
        etag = httpx.get(table + "&format=npy").headers["etag"]
        cases = [
            Case(
                "cached .npy 512 x 512 (1 MiB)",
                Target("service", table + "&format=npy"),
                [
                    Target("constant-bytes FastAPI", url["constant"] + "/npy"),
                    Target("bare ASGI", url["bare"] + "/npy"),
                    Target("nginx static file", url["nginx"] + "/npy.npy"),
                ],
                ">= 1.0x constant-bytes FastAPI; aim 0.8x bare ASGI",
            ),
            Case(
                "cached slice 8 x 512 (16 KiB)",
                Target("service", table + "&stop=8&format=npy"),
                [
                    Target("constant-bytes FastAPI", url["constant"] + "/slice"),
                    Target("bare ASGI", url["bare"] + "/slice"),
                    Target("nginx static file", url["nginx"] + "/slice.npy"),
                ],
                ">= 1.5x constant-bytes FastAPI",
            ),
            Case(
                "cached JSON 512 x 512",
                Target("service", table + "&format=json"),
                [
                    Target("same JSON bytes, FastAPI", url["constant"] + "/json"),
                    Target(
                        "naive tolist() endpoint", url["naive"] + "/table?max_len=512&d_model=512"
                    ),
                ],
                ">= 0.9x the same bytes from memory; > 500x naive tolist()",
            ),
            Case(
                "conditional GET, 304",
                Target("service", table + "&format=npy", {"If-None-Match": etag}),
                [
                    Target("constant-bytes FastAPI, empty", url["constant"] + "/empty"),
                    Target("bare ASGI 304", url["bare"] + "/empty"),
                ],
                "(no target)",
            ),
            Case(
                "apply .npy (32, 256, 512) float32",
                Target("service", url["service"] + TABLE + "/apply", script=apply_npy),
                [
                    Target(
                        "minimal np.load/np.save endpoint",
                        url["minimal"] + "/apply",
                        script=apply_npy,
                    ),
                ],
                ">= 1.2x the minimal endpoint",
            ),
            Case(
                "apply JSON (8, 128, 512)",
                Target("service", url["service"] + TABLE + "/apply", script=apply_json),
                [
                    Target(
                        "minimal orjson endpoint", url["minimal"] + "/apply-json", script=apply_json
                    ),
                ],
                "(no target)",
            ),
        ]
        for case in cases:  # warm: tables computed, hot responses kept
            for target in [case.service, *case.baselines]:
                wrk(target, 1)
                target.settle()
        for round_ in range(args.rounds):
            for case in cases:
                order = [case.service, *case.baselines]
                for target in order if round_ % 2 == 0 else order[::-1]:
                    target.runs.append(wrk(target, args.seconds))
                    target.settle()
                    print(
                        f"round {round_ + 1} {case.name}: {target.name} {target.runs[-1].rps:.0f} req/s",
                        flush=True,
                    )
        profiles = {}
        if not args.no_profile:
            profiles["cached .npy 512 x 512"] = profile(
                proc.pid, cases[0].service, args.seconds + 1, root / "p1"
            )
            profiles["apply .npy (32, 256, 512)"] = profile(
                proc.pid, cases[4].service, args.seconds + 1, root / "p2"
            )
        cold_http, cold_core, cold_floor = cold_tables(url["service"], 7)
        loaded = rss_mib(proc.pid)
    budget = 256 * MiB
    peak, churn_idle, requests = churn_rss(24, budget)

    lines = [
        "# Benchmark results",
        "",
        f"Written by `bench/run.py` ({args.rounds} interleaved rounds of {args.seconds} s per target; medians) on {time.strftime('%Y-%m-%d')}.",
        "Ratios compare the service with each baseline measured in the same run.",
        "",
        versions(),
        "",
        "| case | target | req/s | p50 ms | p99 ms | MB/s | service ÷ baseline | goal |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for case in cases:
        mine = case.service.median()
        lines.append(
            f"| {case.name} | **service** | {mine.rps:,.0f} | {mine.p50_ms:.2f} | {mine.p99_ms:.2f} | {mine.mbps:,.0f} | | {case.goal} |"
        )
        for baseline in case.baselines:
            theirs = baseline.median()
            lines.append(
                f"| | {baseline.name} | {theirs.rps:,.1f} | {theirs.p50_ms:.2f} | {theirs.p99_ms:.2f} | {theirs.mbps:,.0f} | {mine.rps / theirs.rps:,.2f}x | |"
            )
    lines += [
        "",
        "MB/s is wrk's transfer rate (response bytes); for apply the request bodies move as much again.",
        "",
        "## Cold tables: 8192 x 1024 float32",
        "",
        "| what | median time | ÷ numpy floor | goal |",
        "|---|---:|---:|---|",
        f"| numpy floor: float64 vectorized `sin`/`cos`, in process | {cold_floor * 1e3:.1f} ms | 1.00x | |",
        f"| the service's encodings (`registry.rows`), in process | {cold_core * 1e3:.1f} ms | {cold_core / cold_floor:.2f}x | <= 0.5x |",
        f"| a cold `.npy` request over HTTP (32 MiB answer, a new base each time) | {cold_http * 1e3:.1f} ms | {cold_http / cold_floor:.2f}x | |",
        "",
        "Same accuracy: every float32 entry within 2^-23 of exact (tests/encodings/, bench/accuracy.py).",
        "",
        "## Memory",
        "",
        "| what | RSS | goal |",
        "|---|---:|---|",
        f"| idle, after start-up | {idle:.1f} MiB | <= 80 MiB |",
        f"| after this benchmark (default 512 MiB budget) | {loaded:.1f} MiB | |",
        f"| churn: {requests} distinct tables (32 MiB each) and slices through a {budget // MiB} MiB budget, peak | {peak:.1f} MiB (idle {churn_idle:.1f}: +{peak - churn_idle:.1f}) | <= idle + {budget // MiB} + 64 MiB |",
    ]
    if profiles:
        lines += ["", "## Where the time goes now (py-spy, own samples, service process)", ""]
        for name, text in profiles.items():
            lines += [f"{name}:", "", "```", text, "```", ""]
    before = ROOT / "bench" / "PROFILE-BEFORE.md"
    if before.exists():
        lines += ["", before.read_text().strip()]
    (ROOT / "bench" / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What can be checked of the container setup without a Docker engine: the Dockerfile's
lint, the compose file's schema and settings, and the image's install and start steps, run
for real in a fresh virtual environment. (The nginx template's routes:
tests/test_nginx_template.py.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from service.settings import Settings
from tests.support import ROOT, WAIT, running

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
NGINX_TEMPLATE = ROOT / "deploy" / "nginx" / "nginx.conf.template"
OVERLAY = ROOT / "deploy" / "kubernetes" / "overlays" / "proxy-cache"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_hadolint_finds_nothing_above_info() -> None:
    result = subprocess.run(
        [str(BIN / "hadolint"), "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_file_matches_the_compose_spec() -> None:
    result = subprocess.run(
        [
            str(BIN / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(ROOT / "docker-compose.yml"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return document


def test_compose_runs_the_service_on_port_8000_and_grpc_on_8081(compose: dict[str, Any]) -> None:
    service = compose["services"]["pe"]
    assert "profiles" not in service  # `docker compose up` starts it
    assert service["build"] == "."
    environment = service["environment"]
    assert (environment["PE_PORT"], environment["PE_GRPC_PORT"]) == ("8000", "8081")
    assert service["ports"] == ["8000:8000", "8081:8081"]
    assert service["restart"] == "unless-stopped"
    assert "/healthz" in " ".join(service["healthcheck"]["test"])


def test_the_compose_health_check_follows_pe_port(compose: dict[str, Any]) -> None:
    check = compose["services"]["pe"]["healthcheck"]["test"]
    assert check[:3] == ["CMD", "python", "-c"]
    with running() as url:  # on a free port, not 8000
        port = url.rsplit(":", 1)[1]
        probe = subprocess.run(
            [sys.executable, "-c", check[3]], env={"PE_PORT": port}, capture_output=True
        )
        assert probe.returncode == 0, probe.stderr
        # where PE_PORT is not set, the service listens on PORT (Knative's), and so looks
        probe = subprocess.run(
            [sys.executable, "-c", check[3]], env={"PORT": port}, capture_output=True
        )
        assert probe.returncode == 0, probe.stderr
    dead = subprocess.run(
        [sys.executable, "-c", check[3]], env={"PE_PORT": port}, capture_output=True
    )
    assert dead.returncode != 0


def test_compose_settings_are_real_settings(compose: dict[str, Any]) -> None:
    environment = compose["services"]["pe"]["environment"]
    names = {f"PE_{name.upper()}" for name in Settings.model_fields}
    assert set(environment) <= names
    assert set(environment) >= names - {"PE_PRELOAD"}  # every setting in one place
    Settings.model_validate({k.removeprefix("PE_").lower(): v for k, v in environment.items()})


def test_nginx_is_in_front_of_the_service_and_of_the_replicas(compose: dict[str, Any]) -> None:
    """`docker compose up` starts nginx too; the scale profile adds replicas behind it. nginx
    reaches every copy of the service by a name they share."""
    services = compose["services"]
    service, replica, proxy = services["pe"], services["replica"], services["proxy"]
    assert "profiles" not in proxy
    assert proxy["ports"] == ["8080:8080"]
    assert replica["profiles"] == ["scale"]
    assert replica["deploy"]["replicas"] >= 2
    source, target = proxy["volumes"][0].split(":")[:2]
    assert (ROOT / source).resolve() == NGINX_TEMPLATE
    assert target.startswith("/etc/nginx/templates/")
    template = (ROOT / source).read_text()
    placeholders = set(re.findall(r"\$\{(\w+)\}", template))
    assert placeholders == set(proxy["environment"])
    [alias] = service["networks"]["default"]["aliases"]
    assert replica["networks"] == service["networks"]
    upstreams = proxy["environment"]["NGINX_UPSTREAMS"]
    assert re.fullmatch(rf"server {alias}:{service['environment']['PE_PORT']} [^;]*;", upstreams)
    # nginx resolves the name once, at its start: after every copy is up
    assert proxy["depends_on"]["pe"] == {"condition": "service_healthy"}
    assert proxy["depends_on"]["replica"] == {"condition": "service_healthy", "required": False}


def test_compose_locks_the_containers_down_as_kubernetes_does(compose: dict[str, Any]) -> None:
    """The same nginx image as deploy/kubernetes's overlay, and, for it and the service, a
    read-only root filesystem with what they write on tmpfs or volumes: the overlay's
    emptyDirs."""
    overlay = yaml.safe_load_all((OVERLAY / "proxy.yaml").read_text())
    [nginx] = next(m for m in overlay if m["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    proxy, service = compose["services"]["proxy"], compose["services"]["pe"]
    assert proxy["image"] == nginx["image"]
    for container in (proxy, service):
        assert container["read_only"] is True
        assert container["cap_drop"] == ["ALL"]
        assert container["security_opt"] == ["no-new-privileges:true"]
    written = set(proxy["tmpfs"]) | {v.split(":")[-1] for v in proxy["volumes"][1:]}
    assert written == {m["mountPath"] for m in nginx["volumeMounts"]} - {"/etc/nginx/templates"}
    cache = proxy["environment"]["NGINX_CACHE_PATH"]
    assert any(cache.startswith(path + "/") for path in written)
    mplconfig = re.search(r"MPLCONFIGDIR=(\S+)", (ROOT / "Dockerfile").read_text())
    assert mplconfig is not None
    assert set(service["tmpfs"]) == {mplconfig[1], "/tmp"}


def test_nginx_takes_its_body_limit_from_the_replicas_setting(compose: dict[str, Any]) -> None:
    """One value, given to the replicas and to nginx through a YAML anchor, as the plain
    number of bytes that nginx's client_max_body_size reads (the service also takes 64MiB)."""
    limit = compose["services"]["pe"]["environment"]["PE_MAX_BODY_BYTES"]
    assert re.fullmatch(r"[0-9]+", limit), limit
    assert compose["services"]["proxy"]["environment"]["PE_MAX_BODY_BYTES"] == limit
    text = (ROOT / "docker-compose.yml").read_text()
    anchor = re.search(r"PE_MAX_BODY_BYTES: &([\w-]+) ", text)
    assert anchor is not None
    assert re.findall(r"PE_MAX_BODY_BYTES: (\S+)", text) == [f"&{anchor[1]}", f"*{anchor[1]}"]


def test_the_image_runs_the_console_script_as_a_non_root_user() -> None:
    steps = dict(dockerfile_instructions()[::-1])  # the last of each instruction wins
    assert json.loads(steps["CMD"]) == ["pe-service"]
    assert steps["USER"] not in ("root", "0")
    assert steps["EXPOSE"] == "8000 8081"
    env = dict(re.findall(r"(\w+)=(\S+)", steps["ENV"]))
    assert env["PE_GRPC_PORT"] == "8081"
    assert "PE_PORT" not in env  # else Knative's PORT would never be the port
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pe-service"] == "service.__main__:main"  # what `python -m service` runs


def test_the_image_has_the_grpc_extra_built_and_installed() -> None:
    """The same extras in both stages, grpc among them: the image serves gRPC."""
    extras = [
        re.findall(r'\[([a-z,]+)\]"', args)
        for kind, args in dockerfile_instructions()
        if kind == "RUN" and "pip " in args
    ]
    assert len(extras) == 2
    [built], [installed] = extras
    assert built == installed
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(built.split(",")) <= declared["optional-dependencies"].keys()
    assert "grpc" in built.split(",")


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the package installed by the Dockerfile's own
    ``pip wheel`` and ``pip install`` steps (``/wheels`` becomes a temporary folder)."""
    root = tmp_path_factory.mktemp("image")
    wheels, venv = root / "wheels", root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip_steps = [
        args for kind, args in dockerfile_instructions() if kind == "RUN" and "pip " in args
    ]
    assert len(pip_steps) == 2
    for step in pip_steps:
        command = step.split("&&")[0].strip().replace("/wheels", str(wheels))
        assert command.startswith("pip ")
        subprocess.run(
            f"{venv / 'bin' / 'pip'} {command.removeprefix('pip ')}",
            shell=True,
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
    return venv


def test_the_images_install_and_start_steps_work(image_venv: Path) -> None:
    steps = dict(dockerfile_instructions()[::-1])
    command = [str(image_venv / "bin" / json.loads(steps["CMD"])[0])]
    env = dict(re.findall(r"(\w+)=(\S+)", steps["ENV"]))
    assert env["PE_HOST"] == "0.0.0.0"
    healthcheck = json.loads(steps["HEALTHCHECK"].split(" CMD ", 1)[1])
    assert healthcheck[0] == "python"
    with running({"PE_HOST": "127.0.0.1"}, command=command) as url:
        port = url.rsplit(":", 1)[1]
        probe = subprocess.run(
            [str(image_venv / "bin" / "python"), *healthcheck[1:]],
            env={"PE_PORT": port},
            capture_output=True,
        )
        assert probe.returncode == 0, probe.stderr
        # the image has the plots extra: it draws pictures
        picture = httpx.get(
            f"{url}/v1/encodings/sinusoidal/heatmap.png?max_len=8&d_model=8", timeout=WAIT
        )
        assert picture.status_code == 200
        assert picture.headers["content-type"] == "image/png"
    dead = subprocess.run(
        [str(image_venv / "bin" / "python"), *healthcheck[1:]],
        env={"PE_PORT": port},
        capture_output=True,
    )
    assert dead.returncode != 0  # the health check fails when nothing answers


def test_the_readme_installs_the_same_package_the_same_way() -> None:
    readme = (ROOT / "README.md").read_text()
    assert (
        "python3 -m venv .venv && .venv/bin/pip install -U pip && "
        ".venv/bin/pip install '.[plots]' && .venv/bin/python -m service" in readme
    )
    assert "bash .ci/run" in readme


def test_the_readmes_run_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """The README's one command, as written, in a copy of the repository's files (no
    virtual environment of ours): a fresh venv, pip upgraded, the package with its plots
    extra installed; then its last step, the service, answers a table and a picture."""
    readme = (ROOT / "README.md").read_text()
    (command,) = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    *install, serve = command.split(" && ")
    assert serve == ".venv/bin/python -m service"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    copy = tmp_path / "clone"
    for name in filter(None, tracked):
        target = copy / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name.decode()).is_file():
            shutil.copy2(ROOT / name.decode(), target)
    done = subprocess.run(" && ".join(install), shell=True, cwd=copy, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    # the same main as `python -m service` there, with nothing of this checkout on the path
    started = [str(copy / ".venv" / "bin" / "pe-service")]
    with running({"PE_HOST": "127.0.0.1"}, command=started) as url:
        table = httpx.get(
            f"{url}/v1/encodings/sinusoidal?max_len=4&d_model=4&format=npy", timeout=WAIT
        )
        assert table.status_code == 200
        picture = httpx.get(
            f"{url}/v1/encodings/sinusoidal/heatmap.png?max_len=8&d_model=8", timeout=WAIT
        )
        assert picture.headers["content-type"] == "image/png"

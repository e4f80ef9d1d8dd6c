"""What can be checked of deploy/kubernetes without a cluster: the base and the proxy-cache
overlay rendered by kustomize (kubectl's built-in one, and a ``kustomize`` binary where
there is one) and validated against the Kubernetes schemas, strictly (an unknown field is an
error); then checked against the app: its port, its probes' routes, every PE_* setting, the
shutdown time and the memory arithmetic in deployment.yaml's comment."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from service.__main__ import checked_settings
from service.app import create_app
from service.settings import SETTINGS, MiB, Settings
from tests.support import ROOT, in_process, renderers

pytestmark = pytest.mark.slow

KUBERNETES: Final = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS: Final = {
    "base": KUBERNETES / "base",
    "proxy-cache": KUBERNETES / "overlays" / "proxy-cache",
}
# The Kubernetes version the manifests are validated against: kubectl's here. They use
# nothing newer than autoscaling/v2 and policy/v1 (Kubernetes 1.23).
KUBERNETES_VERSION: Final = "1.32.0"
VALIDATE: Final = Path(sys.executable).parent / "kubernetes-validate"
# The interpreter with numpy, uvicorn and matplotlib: 113 MiB idle after a first picture,
# 155 MiB after a 2048 x 2048 one; torch, the image's library engine, 180 MiB more
# (measured; deployment.yaml says so too).
BASELINE: Final = 384 * MiB

Manifest = dict[str, Any]


def render(command: list[str], directory: Path) -> str:
    result = subprocess.run([*command, str(directory)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """Each kustomization as kustomize renders it (the first renderer found)."""
    commands = renderers()
    if not commands:
        pytest.fail(
            "neither kustomize nor kubectl is on PATH: install kubectl (it has kustomize "
            "built in) to render deploy/kubernetes"
        )
    return {name: render(commands[0], path) for name, path in KUSTOMIZATIONS.items()}


def objects(text: str) -> list[Manifest]:
    return [document for document in yaml.safe_load_all(text) if document]


def one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    [found] = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module")
def overlay(rendered: dict[str, str]) -> list[Manifest]:
    """The proxy-cache overlay's objects (the base's and nginx's)."""
    return objects(rendered["proxy-cache"])


@pytest.fixture(scope="module")
def service(overlay: list[Manifest]) -> Manifest:
    """The service's pod template."""
    template: Manifest = one(overlay, "Deployment", "positional-encodings")["spec"]["template"]
    return template


@pytest.fixture(scope="module")
def config(overlay: list[Manifest], service: Manifest) -> dict[str, str]:
    """The ConfigMap the service reads its settings from, by its rendered name."""
    [source] = service["spec"]["containers"][0]["envFrom"]
    data: dict[str, str] = one(overlay, "ConfigMap", source["configMapRef"]["name"])["data"]
    return data


@pytest.fixture(scope="module")
def settings(config: dict[str, str]) -> Settings:
    return Settings.model_validate({SETTINGS[name]: value for name, value in config.items()})


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_manifests_match_the_kubernetes_schemas(
    rendered: dict[str, str], name: str, tmp_path: Path
) -> None:
    """kubernetes-validate ships the schemas (no network); strict refuses unknown fields."""
    manifests = tmp_path / f"{name}.yaml"
    manifests.write_text(rendered[name])
    options = ["--kubernetes-version", KUBERNETES_VERSION, "--strict", "--quiet"]
    result = subprocess.run(
        [str(VALIDATE), *options, str(manifests)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(objects(rendered[name])) == (5 if name == "base" else 9)


def test_the_config_map_holds_every_setting_and_the_service_starts_with_them(
    config: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(config) == set(SETTINGS)
    for name in [name for name in os.environ if name.upper().startswith("PE_")]:
        monkeypatch.delenv(name)
    for name, value in config.items():
        monkeypatch.setenv(name, value)
    settings = checked_settings()  # what python -m service checks before it serves
    assert (settings.host, settings.workers) == ("0.0.0.0", 1)
    # nginx reads it too, where only a number of bytes will do
    assert re.fullmatch(r"[0-9]+", config["PE_MAX_BODY_BYTES"])


def test_the_port_and_the_probes_are_the_apps(service: Manifest, settings: Settings) -> None:
    [container] = service["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": settings.port}]
    probes = {
        kind: container[f"{kind}Probe"]["httpGet"] for kind in ("liveness", "readiness", "startup")
    }
    assert {probe["port"] for probe in probes.values()} == {"http"}
    paths = {kind: probe["path"] for kind, probe in probes.items()}
    assert paths == {"liveness": "/healthz", "readiness": "/readyz", "startup": "/readyz"}
    app = create_app(settings)
    assert {"/healthz", "/readyz"} <= app.openapi()["paths"].keys()
    with in_process(app) as http:  # the ConfigMap's preload computed, then ready
        assert http.get("/healthz").status_code == 200
        deadline = time.monotonic() + 30
        while http.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "not ready in 30 s"
            time.sleep(0.05)


def test_pods_stop_after_their_requests_finish(overlay: list[Manifest], settings: Settings) -> None:
    """A pod's grace period covers its preStop pause (it leaves the Service's endpoints
    before SIGTERM) and PE_SHUTDOWN_TIMEOUT (nginx's too: it waits for the replicas)."""
    for deployment in [m for m in overlay if m["kind"] == "Deployment"]:
        spec = deployment["spec"]["template"]["spec"]
        [container] = spec["containers"]
        pause = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pause[0] == "sleep"
        assert spec["terminationGracePeriodSeconds"] > int(pause[1]) + settings.shutdown_timeout


def request_peaks(settings: Settings) -> dict[str, int]:
    """README, "Memory": the most one request holds, under ``settings``."""
    answer = settings.max_elements * 8  # the largest answer: PE_MAX_ELEMENTS float64 numbers
    pixels = settings.max_image_width * settings.max_image_height
    return {
        "table, safetensors": 4 * answer,
        "table, npy or raw": 2 * answer,
        "table, JSON": 2 * 25 * settings.max_json_elements,  # at most 25 characters a number
        "apply, npy or npz": 4 * settings.max_body_bytes,
        "apply, JSON": 72 * settings.max_json_elements,
        "picture": 64 * pixels + answer + 42 * MiB,  # its pixels, its rows, matplotlib
    }


def memory(settings: Settings, at_once: int) -> int:
    """Cache, slow clients' answers, posted bodies, the interpreter, and ``at_once``
    requests at their most, for each worker."""
    requests = at_once * max(request_peaks(settings).values())
    held = (
        settings.cache_bytes
        + settings.slow_client_bytes
        + settings.posted_bytes
        + BASELINE
        + requests
    )
    return settings.workers * held


def quantity(text: str) -> float:
    """A Kubernetes quantity (``4928Mi``, ``2``, ``250m``) as a number."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "m": 1e-3}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(text.removesuffix(unit)) * factor
    return int(text)


def test_the_memory_is_the_arithmetic_in_the_comment(service: Manifest, settings: Settings) -> None:
    resources = service["spec"]["containers"][0]["resources"]
    at_once = math.ceil(quantity(resources["limits"]["cpu"]))  # large answers: one a core
    total = memory(settings, at_once)
    assert quantity(resources["requests"]["memory"]) == total
    assert quantity(resources["limits"]["memory"]) == total
    comment = (KUBERNETES / "base" / "deployment.yaml").read_text()
    peak = max(request_peaks(settings).values())
    for term in (settings.cache_bytes, settings.slow_client_bytes, settings.posted_bytes, BASELINE):
        assert f"{term // MiB}Mi " in comment
    assert f"+ {at_once} x {peak // MiB}Mi " in comment
    assert f"= {total // MiB}Mi," in comment
    lever = re.search(
        r"PE_MAX_ELEMENTS=([0-9]+) \(the default\) would make it\s+#\s+([0-9]+)Mi", comment
    )
    assert lever is not None
    smaller = settings.model_copy(update={"max_elements": int(lever[1])})
    assert memory(smaller, at_once) == int(lever[2]) * MiB


def test_every_pod_is_locked_down(overlay: list[Manifest], service: Manifest) -> None:
    for deployment in [m for m in overlay if m["kind"] == "Deployment"]:
        spec = deployment["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        # else PE_PORT=tcp://... for a Service named pe..., which the service refuses
        assert spec["enableServiceLinks"] is False
        [container] = spec["containers"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        empty = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        assert empty <= {mount["name"] for mount in container["volumeMounts"]}
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)[-1]
    assert service["spec"]["securityContext"]["runAsUser"] == int(user)
    # what the service writes: matplotlib's cache (the Dockerfile's MPLCONFIGDIR), and /tmp
    mplconfig = re.search(r"MPLCONFIGDIR=(\S+)", dockerfile)
    assert mplconfig is not None
    mounts = {m["mountPath"] for m in service["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {mplconfig[1], "/tmp"}


def test_each_selector_selects_one_deployments_pods(overlay: list[Manifest]) -> None:
    pods = {
        m["metadata"]["name"]: m["spec"]["template"]["metadata"]["labels"]
        for m in overlay
        if m["kind"] == "Deployment"
    }
    for manifest in [m for m in overlay if m["kind"] in ("Service", "PodDisruptionBudget")]:
        selector = manifest["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        chosen = [name for name, labels in pods.items() if selector.items() <= labels.items()]
        assert chosen == [manifest["metadata"]["name"]]
    [autoscaler] = [m for m in overlay if m["kind"] == "HorizontalPodAutoscaler"]
    assert autoscaler["spec"]["scaleTargetRef"]["name"] == "positional-encodings"
    assert "replicas" not in one(overlay, "Deployment", "positional-encodings")["spec"]


def test_the_image_is_this_version(service: Manifest) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert service["spec"]["containers"][0]["image"] == f"positional-encodings:{version}"


def test_nginx_is_configured_from_the_compose_template(
    overlay: list[Manifest], service: Manifest
) -> None:
    template = (ROOT / "deploy" / "nginx" / "nginx.conf.template").read_text()
    spec = one(overlay, "Deployment", "positional-encodings-proxy")["spec"]["template"]["spec"]
    [container] = spec["containers"]
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    source = volumes[mounts["/etc/nginx/templates"]]["configMap"]["name"]
    assert one(overlay, "ConfigMap", source)["data"] == {"default.conf.template": template}
    env = {variable["name"]: variable for variable in container["env"]}
    assert env.keys() == set(re.findall(r"\$\{(\w+)\}", template))
    # the body limit: the very ConfigMap key the service reads
    limit = env["PE_MAX_BODY_BYTES"]["valueFrom"]["configMapKeyRef"]
    [settings] = service["spec"]["containers"][0]["envFrom"]
    assert limit == {"name": settings["configMapRef"]["name"], "key": "PE_MAX_BODY_BYTES"}
    upstream = one(overlay, "Service", "positional-encodings")["spec"]["ports"][0]["port"]
    assert env["NGINX_UPSTREAMS"]["value"] == f"server positional-encodings:{upstream};"
    # its cache on an emptyDir larger than the cache's max_size
    cache = env["NGINX_CACHE_PATH"]["value"]
    [name] = [name for path, name in mounts.items() if cache.startswith(path + "/")]
    max_size = re.search(r"max_size=([0-9]+)g", template)
    assert max_size is not None
    assert quantity(volumes[name]["emptyDir"]["sizeLimit"]) > int(max_size[1]) << 30
    assert {"/tmp", "/etc/nginx/conf.d"} <= mounts.keys()

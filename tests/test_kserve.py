"""What can be checked of deploy/kserve without a cluster.

kustomize renders it. Every manifest passes the ``openAPIV3Schema`` of KServe's own CRDs
(``config/crd/full/`` of a pinned release), strictly: a key the schema does not know is an
error, where the API server would drop it without a word. Those files are not this
repository's: they are read from ``../shared/reference/kserve/<release>`` (or
``$TEST_KSERVE_REFERENCE``), and that test is skipped where they are not.

What the schemas do not say is checked always, as the KServe release's controller and
webhooks check it, or as the service needs it: the runtime serves the InferenceService's
model format and protocol, the deployment mode is set and is Standard, the replica bounds
and the scaling metric fit that mode, the gRPC port is named so that KServe routes gRPC to
it, the probes are the protocol's health routes, and the settings are the service's own."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable
from typing import Any, Final

import jsonschema
import pytest
import yaml

from service.__main__ import checked_settings
from service.settings import SETTINGS
from tests.support import (
    KSERVE_REFERENCE_VARIABLE,
    KSERVE_RELEASE,
    ROOT,
    kserve_reference,
    openapi_document,
    renderers,
)

KSERVE: Final = ROOT / "deploy" / "kserve"
KUBERNETES: Final = ROOT / "deploy" / "kubernetes" / "base"

# The KServe release the manifests are checked against: its CRDs, by file and sha256.
RELEASE: Final = KSERVE_RELEASE
REFERENCE_VARIABLE: Final = KSERVE_REFERENCE_VARIABLE
CRDS: Final = {
    "ClusterServingRuntime": (
        "serving.kserve.io_clusterservingruntimes.yaml",
        "c6f6bbb1b4b11afd1e38bd6d7255a8795b86efa2b7d14946ccff9d23592e6846",
    ),
    "InferenceService": (
        "serving.kserve.io_inferenceservices.yaml",
        "57c3bf13f77de94678bf2ae3748056ec071ad2b9e88d6a28f44fb4710758fcff",
    ),
}

# What KServe v0.20.0's code takes (pkg/constants/constants.go, and the webhook's
# inference_service_validation.go).
CONTAINER: Final = "kserve-container"  # InferenceServiceContainerName
PROTOCOLS: Final = {"v1", "v2", "grpc-v1", "grpc-v2"}
MODE: Final = "serving.kserve.io/deploymentMode"
# each mode by its name; the deprecated names are rewritten to the new ones
MODES: Final = {
    "Standard": "Standard",
    "Knative": "Knative",
    "ModelMesh": "ModelMesh",
    "RawDeployment": "Standard",
    "Serverless": "Knative",
}
AUTOSCALER: Final = "serving.kserve.io/autoscalerClass"
# scaleMetric by autoscaler in Standard mode: the HPA's (AutoscalerAllowedHPAMetricsList);
# KEDA takes none (autoScaling.metrics instead); "external" and "none" make no autoscaler
METRICS: Final = {"hpa": {"cpu", "memory"}, "keda": set[str](), "external": None, "none": None}
ISVC_NAME: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # IsvcNameFmt
# KServe gives a Service port appProtocol kubernetes.io/h2c, and its gateway sends gRPC to
# it, when the port's name holds one of these (isGrpcPort)
GRPC_NAMES: Final = ("grpc", "h2c")
# a container port's name: Kubernetes' IANA_SVC_NAME
PORT_NAME: Final = re.compile(r"(?=.{1,15}$)(?!.*--)(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?")
READY: Final = "/v2/health/ready"
LIVE: Final = "/v2/health/live"

Manifest = dict[str, Any]


def manifests() -> dict[str, Manifest]:
    """deploy/kserve's objects by kind, as its kustomization lists them."""
    kustomization = yaml.safe_load((KSERVE / "kustomization.yaml").read_text())
    found = {}
    for name in kustomization["resources"]:
        for document in yaml.safe_load_all((KSERVE / name).read_text()):
            found[document["kind"]] = document
    return found


@pytest.fixture
def runtime() -> Manifest:
    return manifests()["ClusterServingRuntime"]


@pytest.fixture
def service() -> Manifest:
    return manifests()["InferenceService"]


def container(runtime: Manifest) -> Manifest:
    [only] = runtime["spec"]["containers"]
    found: Manifest = only
    return found


def environment(runtime: Manifest) -> dict[str, str]:
    """The runtime container's settings: each a plain value."""
    return {variable["name"]: variable["value"] for variable in container(runtime)["env"]}


# --- What the schemas do not check -------------------------------------------------------


def problems(runtime: Manifest, service: Manifest) -> list[str]:
    """What KServe's controller and webhooks would refuse, or the service would not serve."""
    found = []
    spec, predictor = runtime["spec"], service["spec"]["predictor"]
    model = predictor["model"]
    if runtime["metadata"]["name"] != model.get("runtime"):
        found.append(f"the InferenceService runs {model.get('runtime')!r}, not the runtime")
    if not ISVC_NAME.fullmatch(service["metadata"]["name"]):
        found.append(f"{service['metadata']['name']!r} is no InferenceService name")
    if spec.get("multiModel"):
        found.append("a multi-model runtime serves no InferenceService predictor")

    # the model format: the runtime's, with the same version if one is given
    formats = spec.get("supportedModelFormats", [])
    wanted = model.get("modelFormat", {})
    if not any(
        f["name"] == wanted.get("name") and wanted.get("version") in (None, f.get("version"))
        for f in formats
    ):
        found.append(f"the runtime serves no model format {wanted!r}")
    if not any(f.get("autoSelect") for f in formats):
        found.append("no format of the runtime is selected automatically")

    # the protocol: v2, said (KServe's default is v1), and served by the runtime
    served = spec.get("protocolVersions", [])
    if unknown := set(served) - PROTOCOLS:
        found.append(f"protocol versions KServe does not know: {sorted(unknown)}")
    if not {"v2", "grpc-v2"} <= set(served):
        found.append(f"the runtime says it speaks {served}, not v2 and grpc-v2")
    if model.get("protocolVersion") != "v2":
        found.append(f"protocolVersion is {model.get('protocolVersion')!r}, not v2")

    # the deployment mode, by annotation: Standard (Knative takes a pod of one port)
    annotations = service["metadata"].get("annotations", {})
    mode = MODES.get(annotations.get(MODE, ""))
    if mode != "Standard":
        found.append(f"{MODE} is {annotations.get(MODE)!r}, not Standard")

    # replicas and the metric the mode's autoscaler takes
    low, high = predictor.get("minReplicas"), predictor.get("maxReplicas")
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        found.append(f"replicas from {low} to {high}: not 1 <= min <= max")
    autoscaler = annotations.get(AUTOSCALER, "hpa")
    if autoscaler not in METRICS:
        found.append(f"{AUTOSCALER} is {autoscaler!r}, which KServe does not know")
    metrics = METRICS.get(autoscaler)
    metric = predictor.get("scaleMetric", "cpu" if autoscaler == "hpa" else None)
    if metrics is None or metric not in metrics:
        found.append(f"scaleMetric {metric!r} is not one the {autoscaler} autoscaler takes")
    target = predictor.get("scaleTarget")
    if metric == "cpu" and not (isinstance(target, int) and 1 <= target <= 100):
        found.append(f"scaleTarget {target!r} is no CPU utilisation percentage (1 to 100)")

    # the container, its ports and its probes
    containers = spec.get("containers", [])
    if [c.get("name") for c in containers] != [CONTAINER]:
        found.append(f"the runtime's containers are not one named {CONTAINER}")
        return found
    [server] = containers
    env = {v["name"]: v.get("value") for v in server.get("env", [])}
    ports = server.get("ports", [])
    names = [port.get("name", "") for port in ports]
    found += [f"{name!r} is no port name" for name in names if not PORT_NAME.fullmatch(name)]
    grpc = [port for port in ports if any(word in port.get("name", "") for word in GRPC_NAMES)]
    if not ports or ports[0] in grpc or str(ports[0]["containerPort"]) != env.get("PE_PORT"):
        found.append("the first port (KServe's port 80) is not HTTP's, PE_PORT")
    if [str(port["containerPort"]) for port in grpc] != [env.get("PE_GRPC_PORT")]:
        found.append(f"no one port named with {' or '.join(GRPC_NAMES)} is PE_GRPC_PORT")
    http = {ports[0].get("name"), ports[0]["containerPort"]} if ports else set()
    for kind, path in (("readiness", READY), ("liveness", LIVE), ("startup", READY)):
        probe = server.get(f"{kind}Probe", {}).get("httpGet", {})
        if probe.get("path") != path or probe.get("port") not in http:
            found.append(f"the {kind} probe is not GET {path} on the HTTP port")
    return found


def test_kserve_would_run_the_manifests(runtime: Manifest, service: Manifest) -> None:
    assert problems(runtime, service) == []


def _set(path: str, value: Any, key: str | None = None) -> Callable[[Manifest, Manifest], None]:
    """A change of the field at ``path`` ("runtime.spec.x" or "service.spec.x"; an integer
    for a list's item), then ``key`` (a name with dots: an annotation's); ``...`` deletes
    it."""

    def change(runtime: Manifest, service: Manifest) -> None:
        which, *keys = path.split(".")
        node: Any = runtime if which == "runtime" else service
        steps = [int(step) if step.isdigit() else step for step in keys]
        *parents, last = [*steps, key] if key else steps
        for step in parents:
            node = node[step]
        if value is ...:
            del node[last]
        else:
            node[last] = value

    return change


SERVER: Final = "runtime.spec.containers.0"
PREDICTOR: Final = "service.spec.predictor"
ANNOTATIONS: Final = "service.metadata.annotations"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_set(f"{SERVER}.name", "service"), id="container-name"),
        pytest.param(_set(f"{PREDICTOR}.model.runtime", "kserve-mlserver"), id="runtime"),
        pytest.param(_set(f"{PREDICTOR}.model.modelFormat.name", "sklearn"), id="format"),
        pytest.param(_set(f"{PREDICTOR}.model.modelFormat.version", "2"), id="format-version"),
        pytest.param(_set("runtime.spec.supportedModelFormats.0.autoSelect", False), id="auto"),
        pytest.param(_set(f"{PREDICTOR}.model.protocolVersion", ...), id="protocol-unset"),
        pytest.param(_set("runtime.spec.protocolVersions", ["v2"]), id="no-grpc-v2"),
        pytest.param(_set("runtime.spec.protocolVersions", ["v2", "grpc-v2", "v3"]), id="v3"),
        pytest.param(_set("runtime.spec.multiModel", True), id="multi-model"),
        pytest.param(_set("service.metadata.name", "Positional"), id="isvc-name"),
        pytest.param(_set(ANNOTATIONS, "Knative", MODE), id="knative"),
        pytest.param(_set(ANNOTATIONS, "Raw", MODE), id="unknown-mode"),
        pytest.param(_set(ANNOTATIONS, ..., MODE), id="mode-unset"),
        pytest.param(_set(ANNOTATIONS, "kpa", AUTOSCALER), id="kpa"),
        pytest.param(_set(ANNOTATIONS, "keda", AUTOSCALER), id="keda"),
        pytest.param(_set(f"{PREDICTOR}.scaleMetric", "concurrency"), id="knative-metric"),
        pytest.param(_set(f"{PREDICTOR}.scaleTarget", 150), id="target-over-100"),
        pytest.param(_set(f"{PREDICTOR}.minReplicas", 9), id="min-over-max"),
        pytest.param(_set(f"{PREDICTOR}.minReplicas", 0), id="scale-to-zero"),
        pytest.param(_set(f"{PREDICTOR}.maxReplicas", ...), id="max-unset"),
        pytest.param(_set(f"{SERVER}.ports.1.name", "rpc"), id="grpc-port-name"),
        pytest.param(_set(f"{SERVER}.ports.1.containerPort", 8082), id="grpc-port-number"),
        pytest.param(_set(f"{SERVER}.ports.0.name", "HTTP"), id="port-name"),
        pytest.param(_set(f"{SERVER}.ports.0.containerPort", 8000), id="http-port-number"),
        pytest.param(_set(f"{SERVER}.readinessProbe.httpGet.path", "/readyz"), id="ready"),
        pytest.param(_set(f"{SERVER}.livenessProbe.httpGet.path", "/healthz"), id="live"),
        pytest.param(_set(f"{SERVER}.startupProbe.httpGet.path", LIVE), id="startup"),
        pytest.param(_set(f"{SERVER}.livenessProbe.httpGet.port", "grpc"), id="probe-port"),
    ],
)
def test_a_manifest_kserve_would_refuse_fails(
    change: Callable[[Manifest, Manifest], None], runtime: Manifest, service: Manifest
) -> None:
    change(runtime, service)
    assert problems(runtime, service)


def test_the_ports_in_the_other_order_fail(runtime: Manifest, service: Manifest) -> None:
    """KServe's Service maps its port 80 to the first port: it must be HTTP's."""
    container(runtime)["ports"].reverse()
    assert problems(runtime, service)


def test_the_probes_are_routes_of_the_app() -> None:
    assert {READY, LIVE} <= openapi_document()["paths"].keys()


def test_the_settings_are_every_setting_and_the_service_starts_with_them(
    runtime: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(runtime)
    assert [v["name"] for v in container(runtime)["env"]] == list(env)  # no name twice
    assert set(env) == set(SETTINGS)
    for name in [name for name in os.environ if name.upper().startswith("PE_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("PORT", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = checked_settings()  # what python -m service checks before it serves
    assert (settings.host, settings.workers) == ("0.0.0.0", 1)
    assert (settings.port, settings.grpc_port) == (8080, 8081)


def settings_env() -> dict[str, str]:
    lines = (KUBERNETES / "settings.env").read_text().splitlines()
    pairs = [line.partition("=") for line in lines if line and not line.startswith("#")]
    return {name: value for name, _, value in pairs}


def test_the_settings_and_the_memory_are_deploy_kubernetes(
    runtime: Manifest, service: Manifest
) -> None:
    """One set of values, but for the ports: the memory is then the arithmetic of
    deploy/kubernetes/base/deployment.yaml, which tests/system/test_kubernetes.py checks."""
    ports = {"PE_PORT", "PE_GRPC_PORT"}
    env, base = environment(runtime), settings_env()
    assert {k: v for k, v in env.items() if k not in ports} == {
        k: v for k, v in base.items() if k not in ports
    }
    deployment = yaml.safe_load((KUBERNETES / "deployment.yaml").read_text())
    [pod] = deployment["spec"]["template"]["spec"]["containers"]
    assert service["spec"]["predictor"]["model"]["resources"] == pod["resources"]
    assert container(runtime)["lifecycle"] == pod["lifecycle"]


def test_pods_stop_after_their_requests_finish(runtime: Manifest, service: Manifest) -> None:
    pause = container(runtime)["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    grace = service["spec"]["predictor"]["terminationGracePeriodSeconds"]
    assert grace > int(pause[1]) + int(environment(runtime)["PE_SHUTDOWN_TIMEOUT"])


def test_the_pods_are_locked_down(runtime: Manifest, service: Manifest) -> None:
    """As deploy/kubernetes's: the pod's fields are the InferenceService's (KServe takes only
    volumes and scheduling from a runtime), the container's the runtime's."""
    predictor = service["spec"]["predictor"]
    assert predictor["enableServiceLinks"] is False  # else PE_..._SERVICE_HOST and the like
    assert predictor["automountServiceAccountToken"] is False
    assert predictor["securityContext"]["runAsNonRoot"] is True
    assert predictor["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)[-1]
    assert predictor["securityContext"]["runAsUser"] == int(user)
    server = container(runtime)
    assert server["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # what the service writes, on emptyDirs: matplotlib's cache (MPLCONFIGDIR) and /tmp
    mplconfig = re.search(r"MPLCONFIGDIR=(\S+)", dockerfile)
    assert mplconfig is not None
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert mounts.keys() == {mplconfig[1], "/tmp"}
    empty = {v["name"] for v in runtime["spec"]["volumes"] if "emptyDir" in v}
    assert set(mounts.values()) == empty


# --- kustomize ---------------------------------------------------------------------------


def test_kustomize_renders_the_manifests_with_the_image_of_this_version() -> None:
    """Only labels and the image's tag are added: a namespace would be given to the
    cluster-scoped runtime too, and a generated ConfigMap's hash would not reach the
    runtime's fields (kustomize does not know the CRDs)."""
    commands = renderers()
    if not commands:
        pytest.fail(
            "neither kustomize nor kubectl is on PATH: install kubectl (it has kustomize "
            "built in) to render deploy/kserve"
        )
    result = subprocess.run([*commands[0], str(KSERVE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rendered = {m["kind"]: m for m in yaml.safe_load_all(result.stdout) if m}
    expected = manifests()
    assert rendered.keys() == expected.keys()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    for kind, manifest in expected.items():
        manifest["metadata"]["labels"] = {"app.kubernetes.io/part-of": "positional-encodings"}
        assert "namespace" not in rendered[kind]["metadata"]
    container(expected["ClusterServingRuntime"])["image"] = f"positional-encodings:{version[1]}"
    assert rendered == expected


# --- KServe's CRDs -----------------------------------------------------------------------


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object of known properties
    that allows no other (not a map's ``additionalProperties``, not
    ``x-kubernetes-preserve-unknown-fields``): an unknown key is then an error, not a
    field the API server drops."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    tightened = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        tightened["additionalProperties"] = False
    return tightened


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft7Validator]:
    """A strict validator of each kind, from the pinned CRD's ``openAPIV3Schema`` of the
    manifest's version."""
    folder = kserve_reference()
    missing = [name for name, _ in CRDS.values() if not (folder / name).is_file()]
    if missing:
        pytest.skip(
            f"KServe {RELEASE}'s CRDs are not at {folder} (set ${REFERENCE_VARIABLE} to a "
            f"folder that has them): {', '.join(missing)}, from config/crd/full/ of "
            "github.com/kserve/kserve at that tag"
        )
    found = {}
    for kind, (name, sha256) in CRDS.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha256, f"{name} is not KServe {RELEASE}'s"
        # 2 MB: libyaml where PyYAML has it, not pure Python (ten times slower)
        crd = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        assert crd["spec"]["names"]["kind"] == kind
        group, version = manifests()[kind]["apiVersion"].split("/")
        assert crd["spec"]["group"] == group
        [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
        schema = strict(served["schema"]["openAPIV3Schema"])
        found[kind] = jsonschema.Draft7Validator(schema)
    return found


def errors(validator: jsonschema.Draft7Validator, manifest: Manifest) -> list[str]:
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(manifest)
    ]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_the_manifests_match_kserves_crds(
    validators: dict[str, jsonschema.Draft7Validator], kind: str
) -> None:
    assert errors(validators[kind], manifests()[kind]) == []


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        pytest.param(
            "ClusterServingRuntime", _set(f"{SERVER}.portz", []), id="unknown-container-key"
        ),
        pytest.param(
            "ClusterServingRuntime",
            _set("runtime.spec.supportedModelFormats.0.autoselect", True),
            id="misspelt-format-key",
        ),
        pytest.param(
            "ClusterServingRuntime", _set(f"{SERVER}.ports.0.containerPort", "8080"), id="type"
        ),
        pytest.param("InferenceService", _set(f"{PREDICTOR}.scaleMetric", "gpu"), id="enum"),
        pytest.param(
            "InferenceService", _set(f"{PREDICTOR}.model.storageURI", "s3://x"), id="spelling"
        ),
        pytest.param("InferenceService", _set(f"{PREDICTOR}.replicas", 2), id="unknown-key"),
    ],
)
def test_what_the_crds_refuse_fails(
    validators: dict[str, jsonschema.Draft7Validator],
    kind: str,
    change: Callable[[Manifest, Manifest], None],
) -> None:
    objects = manifests()
    change(objects["ClusterServingRuntime"], objects["InferenceService"])
    assert errors(validators[kind], objects[kind])

"""The Kubernetes manifests of deploy/k8s. No cluster runs here: every object is
validated strictly against the Kubernetes OpenAPI schemas (kubernetes-validate), then the parts
the worker's sandbox depends on are checked: its pod security context (seccomp profile we ship,
unmasked /proc in a pod user namespace, non-root, no capabilities), one worker process per pod
with its resources, no Docker socket anywhere, and the autoscaler on the queue-depth metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "deploy" / "k8s"
#: The oldest Kubernetes release whose schema has every field used (procMount with hostUsers).
K8S_VERSION = "1.33.0"


def manifests() -> dict[str, list[dict]]:
    """file name -> its objects (the kustomization excluded)."""
    return {
        p.name: [d for d in yaml.safe_load_all(p.read_text()) if d]
        for p in sorted(K8S.glob("*.yaml"))
        if p.name != "kustomization.yaml"
    }


def objects() -> list[dict]:
    return [obj for objs in manifests().values() for obj in objs]


def find(kind: str, name: str) -> dict:
    return next(o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name)


@pytest.mark.parametrize("obj", objects(), ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_every_object_is_valid_for_the_kubernetes_schema(obj):
    for version in (K8S_VERSION, kubernetes_validate.latest_version()):
        kubernetes_validate.validate(obj, version, strict=True)  # raises ValidationError


def test_a_wrong_field_is_caught():
    """The validator is strict: a misspelt security-context field fails (so the test above can)."""
    worker = json.loads(json.dumps(find("Deployment", "worker")))
    worker["spec"]["template"]["spec"]["containers"][0]["securityContext"]["procMounts"] = "Unmasked"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(manifests())
    assert {o["metadata"]["name"] for o in objects() if o["kind"] == "Namespace"} == {kustomization["namespace"]}


def test_worker_pod_security_context():
    pod = find("Deployment", "worker")["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False  # required for procMount Unmasked; the pod's own user namespace
    assert pod["automountServiceAccountToken"] is False
    ctx = pod["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == 10001
    assert ctx["seccompProfile"] == {"type": "Localhost", "localhostProfile": "reward-service/worker.json"}
    assert (REPO / "docker" / "seccomp" / Path(ctx["seccompProfile"]["localhostProfile"]).name).is_file()
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["procMount"] == "Unmasked" and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert not sc.get("privileged")
    # args, not command: the image's entrypoint (tini, PID 1) must stay to reap the orphan each
    # sandboxed step leaves (docker/worker/Dockerfile)
    assert "command" not in container and container["args"] == ["python", "-m", "workers"]
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in (REPO / "docker" / "worker" / "Dockerfile").read_text()
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["REWARD_SERVICE_SANDBOX"] == "bwrap" and env["REWARD_SERVICE_WORKER_CONCURRENCY"] == "1"
    # One worker process per pod: its requests are one simulation's (Verilator builds: build_jobs CPUs).
    assert container["resources"]["requests"]["cpu"] == env["REWARD_SERVICE_BUILD_JOBS"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and "memory" in container["resources"]["limits"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/tmp", "/var/cache/reward-service"} <= mounts  # the only writable places


def test_no_docker_socket_or_host_path_anywhere():
    text = "\n".join(p.read_text() for p in K8S.glob("*.yaml"))
    assert "docker.sock" not in text and "hostPath" not in text and "privileged: true" not in text


def test_every_container_has_resources_and_drops_capabilities():
    for obj in objects():
        if obj["kind"] != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            assert "requests" in container["resources"] and "limits" in container["resources"], container["name"]
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}, container["name"]


def test_images_are_the_compose_stacks():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    for name in ("redis", "api", "worker"):
        (container,) = find("Deployment", name)["spec"]["template"]["spec"]["containers"]
        assert container["image"] == compose[name]["image"]


def test_workers_scale_on_the_queue_depth():
    hpa = find("HorizontalPodAutoscaler", "worker")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == "reward_service_queue_depth"
    # The API exports that gauge under this name.
    telemetry = (REPO / "reward_service" / "api" / "telemetry.py").read_text()
    assert '"reward_service_queue_depth"' in telemetry

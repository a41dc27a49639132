"""deploy/kubernetes: every object valid against the Kubernetes schemas (kubernetes-validate,
strict: an unknown field fails), the KEDA ScaledObjects against KEDA's own CRD schema
(tests/deploy/schemas/keda/, strict the same way), and the facts docs/kubernetes.md promises:
probes, grace periods that cover the drain, disruption budgets, the beat singleton, a migration
Job, requests on every container, and one ScaledObject per worker Deployment on its own queue."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from cortex_workers.queues import QUEUES

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KEDA_CRD = Path(__file__).parent / "schemas" / "keda" / "keda.sh_scaledobjects.yaml"
KUBERNETES_VERSION = "1.34"
"""The Kubernetes release whose schemas (shipped with kubernetes-validate) the objects must
satisfy."""
KEDA_VERSION = "v2.20.2"

Obj = dict[str, Any]


def _objects() -> list[tuple[str, Obj]]:
    listed = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    out: list[tuple[str, Obj]] = []
    for name in listed:
        for doc in yaml.safe_load_all((MANIFESTS / name).read_text()):
            if doc:
                out.append((name, doc))
    return out


OBJECTS = _objects()


def _of(kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for _, o in OBJECTS if o["kind"] == kind}


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever it lists the fields (as the API server's
    strict field validation does)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _keda_schema() -> Obj:
    crd = yaml.safe_load(KEDA_CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    schema: Obj = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return schema


def test_every_file_in_the_directory_is_listed_or_an_example() -> None:
    listed = set(yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert present - listed == {"secret.example.yaml"}
    assert listed <= present


@pytest.mark.parametrize(
    "name,obj",
    [
        (f"{n}:{o['kind']}/{o['metadata']['name']}", o)
        for n, o in OBJECTS
        if o["kind"] != "ScaledObject"
    ],
)
def test_objects_are_valid_kubernetes(name: str, obj: Obj) -> None:
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_example_secret_is_valid_kubernetes() -> None:
    secret = yaml.safe_load((MANIFESTS / "secret.example.yaml").read_text())
    kubernetes_validate.validate(secret, KUBERNETES_VERSION, strict=True)
    assert secret["metadata"]["name"] == "cortex-secrets"


def test_a_typo_fails_validation() -> None:
    """The checks above can fail: an unknown field is refused by both schemas."""
    deployment = copy.deepcopy(_of("Deployment")["cortex-api"])
    deployment["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    scaled = copy.deepcopy(_of("ScaledObject")["cortex-worker-llm"])
    scaled["spec"]["maxReplicas"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, _keda_schema())


def test_scaled_objects_are_valid_against_kedas_crd() -> None:
    schema = _keda_schema()
    scaled = _of("ScaledObject")
    assert scaled
    for obj in scaled.values():
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        jsonschema.validate(obj, schema)


def _workers() -> dict[str, list[str]]:
    """Worker Deployment name -> the queues it consumes."""
    out = {}
    for name, dep in _of("Deployment").items():
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        command = container["command"]
        if command[:2] == ["cortex-workers", "worker"]:
            out[name] = command[command.index("--queues") + 1].split(",")
    return out


def test_every_queue_has_a_worker_deployment() -> None:
    consumed = {q for queues in _workers().values() for q in queues}
    assert {q.value for q in QUEUES} <= consumed


def test_one_scaled_object_per_worker_deployment_on_its_own_queue() -> None:
    scaled = _of("ScaledObject")
    targets = [o["spec"]["scaleTargetRef"]["name"] for o in scaled.values()]
    assert sorted(targets) == sorted(_workers())
    for obj in scaled.values():
        target = obj["spec"]["scaleTargetRef"]["name"]
        queue = _workers()[target][0]
        (trigger,) = obj["spec"]["triggers"]
        assert trigger["type"] == "prometheus"
        query = trigger["metadata"]["query"]
        assert f'cortex_queue_depth{{queue="{queue}"}}' in query
        assert f'cortex_steps_in_flight{{queue="{queue}"}}' in query
        assert float(trigger["metadata"]["threshold"]) > 0
    # the workers that run the reconciler (maintenance) never scale to zero
    for name, queues in _workers().items():
        if "maintenance" in queues:
            assert scaled[name]["spec"]["minReplicaCount"] >= 1


def test_api_probes_healthz_and_readyz() -> None:
    (container,) = _of("Deployment")["cortex-api"]["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = _of("Service")["cortex-api"]
    assert service["spec"]["selector"].items() <= (
        _of("Deployment")["cortex-api"]["spec"]["template"]["metadata"]["labels"].items()
    )


def test_worker_grace_period_covers_the_drain() -> None:
    drain_s = float(_of("ConfigMap")["cortex-config"]["data"]["CORTEX_DRAIN_S"])
    deployments = _of("Deployment")
    for name in _workers():
        spec = deployments[name]["spec"]["template"]["spec"]
        assert spec["terminationGracePeriodSeconds"] >= drain_s + 5, name
        (container,) = spec["containers"]
        assert "livenessProbe" in container, name


def test_beat_is_a_singleton() -> None:
    beat = _of("Deployment")["cortex-beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert "cortex-beat" not in {
        o["spec"]["scaleTargetRef"]["name"] for o in _of("ScaledObject").values()
    }


def test_disruption_budgets_cover_the_api_and_every_worker() -> None:
    budgets = _of("PodDisruptionBudget")
    deployments = _of("Deployment")
    covered = set()
    for budget in budgets.values():
        selector = budget["spec"]["selector"]["matchLabels"]
        for name, dep in deployments.items():
            if selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items():
                covered.add(name)
    assert {"cortex-api", *_workers()} <= covered


def test_a_migration_job_and_requests_on_every_container() -> None:
    (job,) = _of("Job").values()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["cortex-workers", "migrate"]
    for _, obj in OBJECTS:
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        for c in obj["spec"]["template"]["spec"]["containers"]:
            requests = c["resources"]["requests"]
            assert {"cpu", "memory"} <= requests.keys(), obj["metadata"]["name"]
            assert c["envFrom"][0]["configMapRef"] == {"name": "cortex-config"}

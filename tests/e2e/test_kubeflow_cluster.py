"""Kueue's Kubeflow examples on a real kube-apiserver, with the upstream CRDs
(tests/data/kubeflow/): each kind is suspended at create by the webhook, gets Kueue's podSets,
starts with the flavor's nodeSelector, waits with a reason when the quota is gone, and is
Finished from its status, so the next one starts. The operators do not run here: the test
sets each job's status as its operator would."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests import yamlc
from tests.e2e.conftest import (
    controller_process,
    kubectl,
    serve_webhook,
    wait,
    webhook_host_port,
)
from tests.waiting import until_one_waits

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"

# sample, plural, version, framework, Kueue's podSets
KINDS = [
    ("mpijob", "mpijobs", "v2beta1", "kubeflow.org/mpijob", [("launcher", 1), ("worker", 2)]),
    ("pytorchjob", "pytorchjobs", "v1", "kubeflow.org/pytorchjob", [("master", 1), ("worker", 1)]),
    ("tfjob", "tfjobs", "v1", "kubeflow.org/tfjob", [("ps", 1), ("worker", 2)]),
    ("xgboostjob", "xgboostjobs", "v1", "kubeflow.org/xgboostjob", [("master", 1), ("worker", 2)]),
    ("paddlejob", "paddlejobs", "v1", "kubeflow.org/paddlejob", [("worker", 2)]),
    ("jaxjob", "jaxjobs", "v1", "kubeflow.org/jaxjob", [("worker", 2)]),
]
FRAMEWORKS = ",".join(["batch/job", *(k[3] for k in KINDS)])


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    tmp = tmp_path_factory.mktemp("kubeflow")
    for crd in sorted((DATA / "kubeflow").glob("*.yaml")):
        # Server-side: the CRDs are larger than client-side apply's annotation allows.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    webhook = serve_webhook(
        tmp,
        ["--integrations", FRAMEWORKS, "--controller-username", "kubernetes-admin"],
        ["--integrations", FRAMEWORKS],
    )
    kubectl("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
    kubectl(
        "patch",
        "resourceflavor",
        "default-flavor",
        "--type=merge",
        "-p",
        '{"spec":{"nodeLabels":{"instance-type":"spot"}}}',
    )
    controller = controller_process("--integrations", FRAMEWORKS, "--physical-resources", "none")
    yield client.CustomObjectsApi(api_client)
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    for _, plural, *_ in KINDS:
        kubectl("delete", f"{plural}.kubeflow.org", "--all", "-n", "default", check=False)
    kubectl("delete", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return {}


def workload_of(api: client.CustomObjectsApi, job: dict[str, Any]) -> dict[str, Any] | None:
    uid = job["metadata"]["uid"]
    listed = api.list_namespaced_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "default",
        "workloads",
        label_selector=f"kueue.x-k8s.io/job-uid={uid}",
    )
    return next(iter(listed["items"]), None)


def quoted(obj: Any) -> Any:
    """Every number under requests/limits as a string (Kueue's XGBoost example has cpu: 0.5,
    which kube-apiserver refuses: the CRD takes an integer or a string)."""
    if isinstance(obj, dict):
        return {
            k: {r: str(v) if isinstance(v, float) else v for r, v in value.items()}
            if k in ("requests", "limits") and isinstance(value, dict)
            else quoted(value)
            for k, value in obj.items()
        }
    if isinstance(obj, list):
        return [quoted(v) for v in obj]
    return obj


@pytest.mark.parametrize(("sample", "plural", "version", "framework", "pod_sets"), KINDS)
def test_kueues_example_on_a_real_api_server(tower, sample, plural, version, framework, pod_sets):
    api = tower
    example = yamlc.safe_load((EXAMPLES / "jobs" / f"sample-{sample}.yaml").read_text())
    name = example["metadata"]["name"]
    kind = example["kind"]
    args = ("kubeflow.org", version, "default", plural)
    if sample == "xgboostjob":
        refused = kubectl(
            "create", "-f", str(EXAMPLES / "jobs" / "sample-xgboostjob.yaml"), check=False
        )
        assert 'must be of type integer,string: "number"' in refused
        example = quoted(example)

    created = api.create_namespaced_custom_object(*args, example)
    assert created["spec"]["runPolicy"]["suspend"] is True  # the webhook's
    workload = wait(lambda: workload_of(api, created), what=f"the {kind}'s Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    running = wait(
        lambda: (
            (job := api.get_namespaced_custom_object(*args, name))["spec"]["runPolicy"]["suspend"]
            is False
            and job
        ),
        what=f"the {kind} started",
    )
    field = next(k for k in running["spec"] if k.endswith("ReplicaSpecs"))
    for replica in running["spec"][field].values():
        assert replica["template"]["spec"]["nodeSelector"] == {"instance-type": "spot"}

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return api.create_namespaced_custom_object(*args, again)

    made, message = until_one_waits(another, lambda job: workload_of(api, job), timeout=180)
    assert "free in cluster-queue" in message, message

    succeeded = {
        "type": "Succeeded",
        "status": "True",
        "reason": f"{kind}Succeeded",
        "message": f"{kind} default/{name} successfully completed.",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
        "lastUpdateTime": "2026-12-01T00:00:00Z",
    }
    kubectl(
        "patch",
        f"{plural}.kubeflow.org",
        name,
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": [succeeded]}}),
    )
    finished = wait(
        lambda: (
            condition(workload_of(api, created), "Finished").get("status") == "True"
            and workload_of(api, created)
        ),
        what="the first Workload Finished",
    )
    assert condition(finished, "Finished")["message"] == succeeded["message"]
    wait(
        lambda: (
            api.get_namespaced_custom_object(*args, made["metadata"]["name"])["spec"]["runPolicy"][
                "suspend"
            ]
            is False
        ),
        what="the waiting copy started",
    )
    # Free the queue for the next kind.
    kubectl("delete", f"{plural}.kubeflow.org", "--all", "-n", "default", "--wait=true")
    wait(
        lambda: (
            not api.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", "default", "workloads"
            )["items"]
        ),
        what="the Workloads gone with their jobs",
    )

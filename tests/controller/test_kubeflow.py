"""Kueue's Kubeflow examples (MPIJob, PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob), each
applied unchanged with its upstream CRD and Kueue's single-ClusterQueue setup: suspended at
create, Kueue's podSets, started on the flavor's nodes, waiting with a reason when the quota
is gone, and finished when its status says so, so the next one starts. The operators do not
run here: the test sets each job's status as its operator would."""

from __future__ import annotations

import copy
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from certs import kube as certs_kube
from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_kubectl_tower import tower
from tests.servers import start_webhook
from tests.waiting import until_one_waits

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
MPIJOB_CRD = DATA / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml"
MPIJOB_EXAMPLE = EXAMPLES / "jobs" / "sample-mpijob.yaml"

# sample, CRD file, framework, Kueue's podSets (name, count)
KINDS = [
    ("mpijob", "mpijobs.v2beta1", "kubeflow.org/mpijob", [("launcher", 1), ("worker", 2)]),
    ("pytorchjob", "pytorchjobs", "kubeflow.org/pytorchjob", [("master", 1), ("worker", 1)]),
    ("tfjob", "tfjobs", "kubeflow.org/tfjob", [("ps", 1), ("worker", 2)]),
    ("xgboostjob", "xgboostjobs", "kubeflow.org/xgboostjob", [("master", 1), ("worker", 2)]),
    ("paddlejob", "paddlejobs", "kubeflow.org/paddlejob", [("worker", 2)]),
    ("jaxjob", "jaxjobs", "kubeflow.org/jaxjob", [("worker", 2)]),
]


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yamlc.safe_load_all(path.read_text()) if d]


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return {}


def quote_quantities(obj: Any) -> Any:
    """The object with every number under `requests`/`limits` written as a string."""
    if isinstance(obj, dict):
        return {
            k: (
                {r: str(v) if isinstance(v, float) else v for r, v in value.items()}
                if k in ("requests", "limits") and isinstance(value, dict)
                else quote_quantities(value)
            )
            for k, value in obj.items()
        }
    if isinstance(obj, list):
        return [quote_quantities(v) for v in obj]
    return obj


def replica_templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    return {k.lower(): v["template"] for k, v in obj["spec"][field].items()}


ALL = ("batch/job", *(k[2] for k in KINDS))


@pytest.fixture(scope="module")
def kubeflow_webhook(webhook, tmp_path_factory):
    """One webhook for the module with every Kubeflow kind on (the v1 kinds are not in
    Kueue's default set, which the session's webhook serves)."""
    server = start_webhook(
        webhook.certs,
        tmp_path_factory.mktemp("kubeflow-metrics"),
        "--integrations",
        ",".join(ALL),
        workers=1,
    )
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


@pytest.fixture
def webhook_with(cluster, webhook, kubeflow_webhook):
    """The module's webhook registered for these integrations in this test's cluster."""

    def install(*frameworks: str) -> None:
        ca = (webhook.certs / "ca.crt").read_bytes()
        certs_kube.install(cluster.admin.api_client, kubeflow_webhook.url, ca, frameworks)

    return install


@pytest.mark.parametrize(("sample", "crd", "framework", "pod_sets"), KINDS)
def test_kueues_example_runs_as_kueue_documents(
    cluster, start_controller, webhook_with, sample, crd, framework, pod_sets
):
    webhook_with("batch/job", framework)
    cluster.admin.create(
        CRDS, yamlc.safe_load((DATA / "kubeflow" / f"kubeflow.org_{crd}.yaml").read_text())
    )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    # The admin gives the flavor its nodes' label: admission puts it where Kueue puts it.
    cluster.admin.patch(
        r.RESOURCE_FLAVORS, "default-flavor", {"spec": {"nodeLabels": {"instance-type": "spot"}}}
    )
    start_controller(integrations=("batch/job", framework))
    adapter = registry.ADAPTERS[framework]
    resource = r.resource_of(adapter)
    [example] = load(EXAMPLES / "jobs" / f"sample-{sample}.yaml")
    name = example["metadata"]["name"]

    if sample == "xgboostjob":
        # Kueue's example asks for `cpu: 0.5`, a number where the CRD takes an integer or a
        # string: kube-apiserver v1.32 refuses it (in Kueue as in Tower). Quoted, it runs.
        with pytest.raises(ApiError) as refused:
            cluster.admin.create(resource, example, "default")
        assert 'must be of type integer,string: "number"' in str(refused.value)
        example = quote_quantities(example)

    # "Kueue will set suspend to true via webhook and unsuspend it when admitted."
    created = cluster.admin.create(resource, example, "default")
    assert created["spec"]["runPolicy"]["suspend"] is True
    workload = eventually(lambda: cluster.workload_of(created), what="its Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    assert workload["metadata"]["ownerReferences"][0]["kind"] == adapter.kind
    running = eventually(
        lambda: (
            (job := cluster.get(resource.plural, name, "default"))["spec"]["runPolicy"]["suspend"]
            is False
            and job
        ),
        what=f"the {adapter.kind} started",
    )
    for replica, template in replica_templates(running).items():
        assert template["spec"]["nodeSelector"] == {"instance-type": "spot"}, replica

    # Copies of it until one finds the quota gone: it waits, and says why.
    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return cluster.admin.create(resource, again, "default")

    made, message = until_one_waits(another, cluster.workload_of)
    assert "cpu in flavor default-flavor" in message, message
    assert "free in cluster-queue" in message, message
    assert (
        cluster.get(resource.plural, made["metadata"]["name"], "default")["spec"]["runPolicy"][
            "suspend"
        ]
        is True
    )

    # A user who unsuspends it by hand is kept out: the webhook guards runPolicy.suspend.
    kept = cluster.admin.patch(
        resource, made["metadata"]["name"], {"spec": {"runPolicy": {"suspend": False}}}, "default"
    )
    assert kept["spec"]["runPolicy"]["suspend"] is True

    # `kubectl tower why` finds the job by its kind and says why it waits.
    said = tower(cluster, "why", made["metadata"]["name"], "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)
    assert (answer["kind"], answer["state"]) == (adapter.kind, "Pending")

    # The operator says the first one succeeded: its Workload is Finished, the waiting one runs.
    succeeded = {
        "type": "Succeeded",
        "status": "True",
        "reason": f"{adapter.kind}Succeeded",
        "message": f"{adapter.kind} default/{name} successfully completed.",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
        "lastUpdateTime": "2026-12-01T00:00:00Z",
    }
    cluster.admin.patch(
        resource, name, {"status": {"conditions": [succeeded]}}, "default", subresource="status"
    )
    finished = eventually(
        lambda: (
            condition(cluster.workload_of(created), "Finished").get("status") == "True"
            and cluster.workload_of(created)
        ),
        what="the first Workload Finished",
    )
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    assert condition(finished, "Finished")["message"] == succeeded["message"]
    eventually(
        lambda: (
            cluster.get(resource.plural, made["metadata"]["name"], "default")["spec"]["runPolicy"][
                "suspend"
            ]
            is False
        ),
        what="the waiting copy started once the quota came back",
    )

    # Kueue: a finished job whose Workload is deleted is let go, and gets no new Workload.
    uid = created["metadata"]["uid"]
    made_again: list[str] = []

    def watch_for_a_new_one(event: str, kind: Any, obj: dict[str, Any]) -> None:
        labels = obj["metadata"].get("labels") or {}
        mine = labels.get("kueue.x-k8s.io/job-uid") == uid
        if event == "ADDED" and kind.plural == "workloads" and mine:
            made_again.append(obj["metadata"]["name"])

    cluster.api.hooks.append(watch_for_a_new_one)
    cluster.admin.delete(r.WORKLOADS, finished["metadata"]["name"], "default")
    eventually(lambda: cluster.workload_of(created) is None, what="the Workload gone")
    # The job changes after that, so the controller looks at it again; the waiting copy's
    # end, written after it, is the witness that it has.
    cluster.admin.patch(resource, name, {"metadata": {"labels": {"seen": "again"}}}, "default")
    cluster.admin.patch(
        resource,
        made["metadata"]["name"],
        {"status": {"conditions": [succeeded]}},
        "default",
        subresource="status",
    )
    eventually(
        lambda: condition(cluster.workload_of(made), "Finished").get("status") == "True",
        what="the copy's Workload Finished",
    )
    assert made_again == [], f"a new Workload was made for the finished {adapter.kind}"
    assert cluster.workload_of(created) is None
    assert cluster.get(resource.plural, name, "default")["spec"]["runPolicy"]["suspend"] is False


def test_a_v1_kind_not_enabled_is_left_alone(cluster, start_controller):
    """Kueue's default set leaves the Kubeflow v1 jobs off: Tower's too."""
    cluster.admin.create(
        CRDS, yamlc.safe_load((DATA / "kubeflow" / "kubeflow.org_pytorchjobs.yaml").read_text())
    )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    start_controller()
    [example] = load(EXAMPLES / "jobs" / "sample-pytorchjob.yaml")
    resource = r.resource_of(registry.ADAPTERS["kubeflow.org/pytorchjob"])
    created = cluster.admin.create(resource, example, "default")
    assert "runPolicy" not in created["spec"] or not created["spec"]["runPolicy"].get("suspend")
    # A Job created after it is admitted: the controller has looked, and made nothing for it.
    job = cluster.job("after", "1")
    eventually(lambda: cluster.get("jobs", "after", "default")["spec"]["suspend"] is False)
    assert cluster.workload_of(created) is None
    assert cluster.workload_of(job) is not None

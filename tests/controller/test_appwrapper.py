"""Kueue's AppWrapper samples, each applied unchanged with the appwrapper CRD and Kueue's
single-ClusterQueue setup: suspended at create, Kueue's podSets, started with the flavor's
nodeSelector in each component's podSetInfos, waiting with a reason when the quota is gone,
finished from the phase. The appwrapper controller does not run here: the test sets the
status it would (QuotaReserved while its resources are deployed, then the phase)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_kubeflow import condition, load
from tests.waiting import until_one_waits

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
APPWRAPPERS = r.resource_of(registry.ADAPTERS["workload.codeflare.dev/appwrapper"])
NOW = "2026-12-01T00:00:00Z"

SAMPLES = [
    ("pytorch", [("sample-appwrapper-pytorch-job-0", 1), ("sample-appwrapper-pytorch-job-1", 1)]),
    ("deployment", [("sample-appwrapper-deployment-0", 3)]),
]


def deployed(cluster: Any, name: str, phase: str, resources: bool) -> None:
    """The status the appwrapper controller writes as it deploys or removes the components."""
    status = "True" if resources else "False"
    conditions = [
        {"type": t, "status": status, "reason": "Test", "message": "", "lastTransitionTime": NOW}
        for t in ("QuotaReserved", "ResourcesDeployed")
    ]
    cluster.admin.patch(
        APPWRAPPERS,
        name,
        {"status": {"phase": phase, "conditions": conditions}},
        "default",
        subresource="status",
    )


def started(cluster: Any, name: str) -> dict[str, Any] | None:
    aw = cluster.get("appwrappers", name, "default")
    return aw if aw is not None and aw["spec"].get("suspend") is False else None


@pytest.mark.parametrize(("sample", "pod_sets"), SAMPLES)
def test_kueues_sample_runs_as_kueue_documents(cluster, start_controller, sample, pod_sets):
    cluster.admin.create(
        CRDS,
        yamlc.safe_load(
            (DATA / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml").read_text()
        ),
    )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    cluster.admin.patch(
        r.RESOURCE_FLAVORS, "default-flavor", {"spec": {"nodeLabels": {"instance-type": "spot"}}}
    )
    start_controller()  # Kueue's default set has workload.codeflare.dev/appwrapper
    [example] = load(EXAMPLES / "appwrapper" / f"{sample}-sample.yaml")
    name = example["metadata"]["name"]

    created = cluster.admin.create(APPWRAPPERS, example, "default")
    assert created["spec"]["suspend"] is True
    workload = eventually(lambda: cluster.workload_of(created), what="its Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    assert workload["metadata"]["name"].startswith(f"appwrapper-{name}-")
    running = eventually(lambda: started(cluster, name), what="the AppWrapper started")
    [component] = running["spec"]["components"]
    assert component["template"] == example["spec"]["components"][0]["template"]  # untouched
    assert [i["nodeSelector"] for i in component["podSetInfos"]] == [
        {"instance-type": "spot"}
    ] * len(pod_sets)
    assert [i["labels"]["kueue.x-k8s.io/podset"] for i in component["podSetInfos"]] == [
        n for n, _ in pod_sets
    ]
    deployed(cluster, name, "Running", True)

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return cluster.admin.create(APPWRAPPERS, again, "default")

    made, message = until_one_waits(another, cluster.workload_of, most=40)  # 300m each
    assert "free in cluster-queue" in message, message
    waiting = made["metadata"]["name"]
    assert cluster.get("appwrappers", waiting, "default")["spec"]["suspend"] is True

    # A user who unsuspends it by hand is kept out.
    kept = cluster.admin.patch(APPWRAPPERS, waiting, {"spec": {"suspend": False}}, "default")
    assert kept["spec"]["suspend"] is True
    said = tower(cluster, "why", waiting, "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    assert (json.loads(said.stdout)["kind"], json.loads(said.stdout)["state"]) == (
        "AppWrapper",
        "Pending",
    )

    # Its controller says it succeeded: the Workload is Finished, the waiting one starts.
    deployed(cluster, name, "Succeeded", False)
    finished = eventually(
        lambda: (
            condition(cluster.workload_of(created), "Finished").get("status") == "True"
            and cluster.workload_of(created)
        ),
        what="the Workload Finished",
    )
    assert condition(finished, "Finished")["message"] == "AppWrapper finished successfully"
    eventually(lambda: started(cluster, waiting), what="the waiting copy started")


def test_a_failed_appwrapper_holds_its_quota_until_its_resources_are_deleted(
    cluster, start_controller
):
    cluster.admin.create(
        CRDS,
        yamlc.safe_load(
            (DATA / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml").read_text()
        ),
    )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    start_controller()
    [example] = load(EXAMPLES / "appwrapper" / "pytorch-sample.yaml")
    name = example["metadata"]["name"]
    created = cluster.admin.create(APPWRAPPERS, example, "default")
    eventually(lambda: started(cluster, name), what="the AppWrapper started")
    deployed(cluster, name, "Running", True)

    # It fails with its resources still deployed: Kueue calls it "still deleting".
    deployed(cluster, name, "Failed", True)
    big = copy.deepcopy(example)
    big["metadata"]["name"] = "needs-all"
    for role in ("Master", "Worker"):
        spec = big["spec"]["components"][0]["template"]["spec"]["pytorchReplicaSpecs"][role]
        spec["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"
    cluster.admin.create(APPWRAPPERS, big, "default")
    wl = eventually(lambda: cluster.workload_of(created), what="its Workload")
    assert condition(wl, "Finished").get("status") != "True"
    assert cluster.get("appwrappers", "needs-all", "default")["spec"]["suspend"] is True

    # Its resources are gone: now it is finished, and the quota passes on.
    deployed(cluster, name, "Failed", False)
    eventually(
        lambda: condition(cluster.workload_of(created), "Finished").get("reason") == "Failed",
        what="the Workload Finished as Failed",
    )
    eventually(lambda: started(cluster, "needs-all"), what="the big one started")

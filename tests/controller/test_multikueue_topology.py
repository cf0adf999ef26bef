"""MultiKueue with topology-aware scheduling on two API doubles: the manager reserves a
topology podSet without placing it (delayedTopologyRequest Pending), the worker's Kueue
(played by the test, from Kueue's contract) admits the copy with a topologyAssignment, and the
manager's check turns Ready with the request Ready in the same write, no assignment copied
back (Kueue's multikueue workload.go, syncAdmittingRemoteState; e2e
multikueue/baseline/tas_test.go "Should admit a Job and assign topology in the worker
cluster")."""

from __future__ import annotations

from typing import Any

from extender.kube.api import resources as r
from extender.kube.controller.multikueue.topology import placed_on_worker
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_multikueue import _condition, _start, routed_webhook
from tests.controller.test_multikueue import worker as worker  # the fixture
from tests.controller.workers import name_worker

HOSTNAME = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
_ = routed_webhook  # the fixture


def _manager_setup(cluster: Cluster) -> None:
    """Kueue's e2e BeforeEach on the manager: a hostname Topology, its flavor, a ClusterQueue
    with the MultiKueue check and a LocalQueue."""
    v = "kueue.x-k8s.io/v1beta2"
    for doc in (
        {"apiVersion": v, "kind": "Topology", "metadata": {"name": "default"},
         "spec": {"levels": [{"nodeLabel": HOSTNAME}]}},
        {"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": "tas-flavor"},
         "spec": {"nodeLabels": {"instance-type": "tas-node"}, "topologyName": "default"}},
        {"apiVersion": v, "kind": "MultiKueueConfig", "metadata": {"name": "mk-config"},
         "spec": {"clusters": ["worker1"]}},
        {"apiVersion": v, "kind": "AdmissionCheck", "metadata": {"name": "mk-check"},
         "spec": {"controllerName": MULTIKUEUE, "parameters": {
             "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk-config"}}},
        {"apiVersion": v, "kind": "ClusterQueue", "metadata": {"name": "tas-cq"},
         "spec": {"namespaceSelector": {},
                  "admissionChecksStrategy": {"admissionChecks": [{"name": "mk-check"}]},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                      {"name": "tas-flavor", "resources": [
                          {"name": "cpu", "nominalQuota": "8"},
                          {"name": "memory", "nominalQuota": "8Gi"}]}]}]}},
        {"apiVersion": v, "kind": "LocalQueue",
         "metadata": {"name": "tas-lq", "namespace": "default"},
         "spec": {"clusterQueue": "tas-cq"}},
    ):  # fmt: skip
        cluster.apply(doc)


def _tas_job(cluster: Cluster) -> dict[str, Any]:
    """Kueue's e2e Job: two pods of 500m, required on one host."""
    return cluster.admin.create(r.JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "tas-job", "labels": {"kueue.x-k8s.io/queue-name": "tas-lq"}},
        "spec": {"parallelism": 2, "completions": 2, "template": {
            "metadata": {"annotations": {REQUIRED: HOSTNAME}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "busybox:1.36",
                "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}}}]}}},
    }, "default")  # fmt: skip


def _admit_as_kueue(worker: Cluster, name: str, host: str) -> None:
    """What the worker's Kueue writes when its TAS places the copy's two pods on `host`."""
    copy = worker.get("workloads", name, "default")
    assert copy is not None
    [ps] = copy["spec"]["podSets"]
    now = "2026-01-01T00:00:00Z"
    status = {
        "conditions": [
            {"type": t, "status": "True", "reason": reason, "message": message,
             "lastTransitionTime": now, "observedGeneration": 1}
            for t, reason, message in (
                ("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue tas-cq"),
                ("Admitted", "Admitted", "The workload is admitted"),
            )
        ],
        "admission": {"clusterQueue": "tas-cq", "podSetAssignments": [{
            "name": ps["name"], "count": ps["count"],
            "flavors": {"cpu": "tas-flavor", "memory": "tas-flavor"},
            "resourceUsage": {"cpu": "1", "memory": "400Mi"},
            "topologyAssignment": {"levels": [HOSTNAME], "slices": [{
                "domainCount": 1, "podCounts": {"universal": ps["count"]},
                "valuesPerLevel": [{"universal": host}]}]},
        }]},
    }  # fmt: skip
    worker.admin.patch(r.WORKLOADS, name, {"status": status}, "default", subresource="status")


def _assignment(cluster: Cluster, key: str) -> dict[str, Any]:
    wl = cluster.get("workloads", key, "default") or {}
    [psa] = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or [{}]
    return dict(psa)


def test_the_workers_placement_makes_the_managers_delayed_request_ready(
    cluster, worker, routed_webhook
):
    name_worker(cluster, worker, "worker1", "worker1-secret")
    _manager_setup(cluster)
    running = _start(cluster)
    try:
        job = _tas_job(cluster)
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        # Reserved on the manager without a placement: the worker's TAS will place it.
        pending = eventually(
            lambda: (a := _assignment(cluster, key)).get("delayedTopologyRequest") and a,
            timeout=20,
            what="the manager's reservation",
        )
        assert pending["delayedTopologyRequest"] == "Pending"
        assert "topologyAssignment" not in pending
        eventually(lambda: worker.get("workloads", key, "default"), what="the copy on the worker")
        _admit_as_kueue(worker, key, "kind-worker")

        def ready() -> dict[str, Any] | None:
            wl = cluster.get("workloads", key, "default") or {}
            [check] = (wl.get("status") or {}).get("admissionChecks") or [{}]
            return wl if check.get("state") == "Ready" else None

        wl = eventually(ready, timeout=20, what="the manager's check Ready")
        [check] = wl["status"]["admissionChecks"]
        assert check["message"] == 'The workload was admitted on "worker1"'
        [psa] = wl["status"]["admission"]["podSetAssignments"]
        assert psa["delayedTopologyRequest"] == "Ready"
        assert "topologyAssignment" not in psa  # the pods run on the worker, not here
        assert psa["count"] == 2
        admitted = eventually(
            lambda: (
                (c := _condition(cluster.get("workloads", key, "default"), "Admitted"))
                and c["status"] == "True"
                and c
            ),
            timeout=20,
            what="the manager's Workload admitted",
        )
        assert admitted["reason"] == "Admitted"
    finally:
        running.halt()


def test_only_the_podsets_the_worker_placed_turn_ready():
    local = {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "launcher", "count": 1, "delayedTopologyRequest": "Pending"},
        {"name": "workers", "count": 4, "delayedTopologyRequest": "Pending"},
        {"name": "plain", "count": 1},
    ]}}}  # fmt: skip
    remote = {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "launcher", "count": 1},
        {"name": "workers", "count": 4, "topologyAssignment": {"levels": [HOSTNAME]}},
    ]}}}  # fmt: skip
    placed = placed_on_worker(local, remote)
    assert placed is not None
    assert [p.get("delayedTopologyRequest") for p in placed["podSetAssignments"]] == [
        "Pending",
        "Ready",
        None,
    ]
    # The manager's own object is untouched, and nothing is left to do once Ready.
    assert local["status"]["admission"]["podSetAssignments"][1]["delayedTopologyRequest"] == (
        "Pending"
    )
    assert placed_on_worker({"status": {"admission": placed}}, remote) is None
    assert placed_on_worker(local, None) is None

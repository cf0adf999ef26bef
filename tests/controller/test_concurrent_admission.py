"""Kueue's concurrent admission through the API double, the real webhook and the controller
(the ConcurrentAdmission gate on): a Job queued to a ClusterQueue with a
concurrentAdmissionPolicy becomes a parent Workload with one variant per flavor; the parent
runs with its admitted variant's admission; with the preferred flavor's quota freed, the job
migrates there and the other variant is deactivated; once the job is done, the variants are
finished and the quota is free (Kueue v0.19.2's concurrentadmission controller and
test/e2e/singlecluster/baseline/concurrent_admission_test.go)."""

from __future__ import annotations

from typing import Any

from extender.core.scheduling.options import SchedulingOptions
from extender.kube.api import resources as r
from tests.controller.conftest import eventually

KUEUE = "kueue.x-k8s.io"
PARENT = f"{KUEUE}/concurrent-admission-parent"
ALLOWED = f"{KUEUE}/workload-allowed-resource-flavors"
GATE_ON: dict[str, Any] = {
    "feature_gates": {"ConcurrentAdmission": True},
    "scheduling": SchedulingOptions(concurrent_admission=True),
}


def _flavor(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"instance-type": name}},
    }


def _quotas(name: str, cpu: str) -> dict[str, Any]:
    return {
        "name": name,
        "resources": [
            {"name": "cpu", "nominalQuota": cpu},
            {"name": "memory", "nominalQuota": "10Gi"},
        ],
    }


def setup(cluster: Any, reservation_cpu: str = "5") -> None:
    cq = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [_quotas("reservation", reservation_cpu), _quotas("spot", "5")],
                }
            ],
        },
    }
    lq = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
    }
    cluster.apply(_flavor("reservation"), _flavor("spot"), cq, lq)


def _workloads(cluster: Any) -> list[dict[str, Any]]:
    return cluster.api.list("workloads", "default")


def _variants(cluster: Any, parent: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The parent's variants by their flavor."""
    uid = parent["metadata"]["uid"]
    return {
        w["metadata"]["annotations"][ALLOWED]: w
        for w in _workloads(cluster)
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or ())
    }


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def _admitted_on(obj: dict[str, Any] | None) -> str | None:
    if not _true(obj, "Admitted"):
        return None
    assert obj is not None
    return obj["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]


def _parent(cluster: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    parent = cluster.workload_of(job)
    labels = (parent or {}).get("metadata", {}).get("labels") or {}
    return parent if labels.get(PARENT) == "true" else None


def _node_selector(cluster: Any, job: dict[str, Any]) -> dict[str, str]:
    current = cluster.get("jobs", job["metadata"]["name"], "default") or {}
    if current.get("spec", {}).get("suspend") is not False:
        return {}
    return current["spec"]["template"]["spec"].get("nodeSelector") or {}


def test_a_parent_with_a_variant_per_flavor_runs_on_the_first(cluster, start_controller):
    setup(cluster)
    start_controller(**GATE_ON)
    job = cluster.job("sample", "200m", duration="600s")
    parent = eventually(lambda: _parent(cluster, job), what="the parent Workload labelled")
    variants = eventually(
        lambda: v if len(v := _variants(cluster, parent)) == 2 else None, what="two variants"
    )
    assert len(_workloads(cluster)) == 3
    for flavor, variant in variants.items():
        owner = variant["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "Workload",
            parent["metadata"]["name"],
            True,
        )
        assert variant["spec"]["preemptionGates"] == [{"name": f"{KUEUE}/concurrent-admission"}]
        assert variant["metadata"]["name"].startswith("job-sample-variant-" + flavor)
    eventually(
        lambda: _admitted_on(cluster.workload_of(job)) == "reservation",
        what="the parent admitted on reservation",
    )
    eventually(
        lambda: _node_selector(cluster, job) == {"instance-type": "reservation"},
        what="the job running on reservation's nodes",
    )
    eventually(
        lambda: _variants(cluster, parent)["spot"]["spec"].get("active") is False,
        what="the spot variant deactivated",
    )
    cq = eventually(
        lambda: c if (c := cluster.get("clusterqueues", "cq")).get("status") else None,
        what="the ClusterQueue's status",
    )
    usage = {
        f["name"]: {r["name"]: r["total"] for r in f["resources"]}
        for f in cq["status"].get("flavorsUsage") or []
    }
    assert usage.get("spot", {}).get("cpu") in (None, "0")  # counted once, in reservation


def test_the_job_migrates_to_the_preferred_flavor_once_it_has_room(cluster, start_controller):
    setup(cluster, reservation_cpu="0")
    start_controller(**GATE_ON)
    job = cluster.job("sample", "200m", duration="600s")
    parent = eventually(lambda: _parent(cluster, job), what="the parent Workload labelled")
    eventually(lambda: _admitted_on(cluster.workload_of(job)) == "spot", what="the parent on spot")
    eventually(
        lambda: _node_selector(cluster, job) == {"instance-type": "spot"},
        what="the job running on spot",
    )
    variants = _variants(cluster, parent)
    assert _admitted_on(variants["spot"]) == "spot"
    assert not _true(variants["reservation"], "QuotaReserved")
    assert variants["reservation"]["spec"].get("active", True) is True
    groups = cluster.get("clusterqueues", "cq")["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "5"
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": groups}})
    eventually(
        lambda: _admitted_on(cluster.workload_of(job)) == "reservation",
        timeout=20,
        what="the parent migrated to reservation",
    )
    eventually(
        lambda: _node_selector(cluster, job) == {"instance-type": "reservation"},
        what="the job running on reservation's nodes",
    )
    variants = eventually(
        lambda: v if (v := _variants(cluster, parent))["spot"]["spec"].get("active") is False
        else None,
        what="the spot variant deactivated",
    )  # fmt: skip
    assert not _true(variants["spot"], "QuotaReserved")
    evicted = [c for c in variants["spot"]["status"]["conditions"] if c["type"] == "Evicted"]
    assert evicted
    assert evicted[0]["reason"] == "FlavorMigration"


def test_a_finished_job_finishes_its_variants(cluster, start_controller):
    setup(cluster)
    start_controller(**GATE_ON)
    job = cluster.job("sample", "200m", duration="1s")
    parent = eventually(lambda: _parent(cluster, job), what="the parent Workload labelled")
    eventually(lambda: _true(cluster.workload_of(job), "Finished"), what="the parent finished")
    eventually(
        lambda: all(_true(v, "Finished") for v in _variants(cluster, parent).values()),
        what="its variants finished",
    )


def test_with_the_gate_off_the_policy_keeps_the_cluster_queue_inactive(cluster, start_controller):
    setup(cluster)
    start_controller()
    cq = eventually(
        lambda: c if ((c := cluster.get("clusterqueues", "cq")).get("status") or {}).get(
            "conditions") else None,
        what="the ClusterQueue's status",
    )  # fmt: skip
    active = next(c for c in cq["status"]["conditions"] if c["type"] == "Active")
    assert active["status"] == "False"
    assert "spec.concurrentAdmissionPolicy" in active["message"]


def _priority_classes(cluster: Any) -> None:
    cluster.apply(
        *[
            {
                "apiVersion": f"{KUEUE}/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in (("low", 10), ("high", 100))
        ]
    )


def test_a_variant_preempts_once_its_gate_is_opened(cluster, start_controller):
    """The preferred variant that needs to preempt is gated until the family's controller
    opens its gate; then it preempts the lower-priority job's variant, whose job stops."""
    setup(cluster, reservation_cpu="1")
    groups = cluster.get("clusterqueues", "cq")["spec"]["resourceGroups"]
    groups[0]["flavors"][1]["resources"][0]["nominalQuota"] = "0"
    cluster.admin.patch(
        r.CLUSTER_QUEUES,
        "cq",
        {"spec": {"resourceGroups": groups, "preemption": {"withinClusterQueue": "LowerPriority"}}},
    )
    _priority_classes(cluster)
    start_controller(**GATE_ON)
    low = cluster.job("low", "1", duration="600s", labels={f"{KUEUE}/priority-class": "low"})
    eventually(
        lambda: _node_selector(cluster, low) == {"instance-type": "reservation"},
        what="the low job running on reservation",
    )
    high = cluster.job("high", "1", duration="600s", labels={f"{KUEUE}/priority-class": "high"})
    high_parent = eventually(lambda: _parent(cluster, high), what="the high parent")
    eventually(
        lambda: _admitted_on(cluster.workload_of(high)) == "reservation",
        timeout=20,
        what="the high job admitted on reservation",
    )
    gates = _variants(cluster, high_parent)["reservation"]["status"]["preemptionGates"]
    assert [(g["name"], g["position"]) for g in gates] == [
        (f"{KUEUE}/concurrent-admission", "Open")
    ]
    eventually(
        lambda: (cluster.get("jobs", "low", "default") or {})["spec"].get("suspend") is True,
        what="the low job stopped",
    )
    low_variant = _variants(cluster, cluster.workload_of(low))["reservation"]
    evicted = [c for c in low_variant["status"]["conditions"] if c["type"] == "Evicted"]
    assert evicted[0]["reason"] == "Preempted"
    assert not _true(cluster.workload_of(low), "QuotaReserved")

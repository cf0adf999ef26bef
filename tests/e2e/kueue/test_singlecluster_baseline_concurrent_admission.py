"""Kueue v0.19.2 test/e2e/singlecluster/baseline/concurrent_admission_test.go, ported case by
case.

Kueue's e2e configuration (test/e2e/config/default) turns its alpha ConcurrentAdmission gate on;
the suite's Configuration here leaves it off, so this module restarts the controller with it on
for its cases, and back after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    CONFIGURATION,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/concurrent_admission_test.go"
PARENT_LABEL = f"{KUEUE}/concurrent-admission-parent"
ALLOWED_FLAVORS = f"{KUEUE}/workload-allowed-resource-flavors"


@pytest.fixture(scope="module", autouse=True)
def concurrent_admission(tower: Tower) -> Iterator[None]:
    """The controller with Kueue's e2e featureGates' ConcurrentAdmission on, for this file."""
    document = yaml.safe_load(CONFIGURATION)
    document["featureGates"] = {"ConcurrentAdmission": True}
    restart_with(tower, yaml.safe_dump(document))
    yield
    restart_with(tower)


@pytest.fixture
def flavors(cluster: Cluster, ns: str) -> Iterator[dict[str, str]]:
    """The BeforeEach: flavors reservation and spot, a ClusterQueue of 5 cpu and 1Gi in each
    with concurrent admission (TryPreferredFlavors), LocalQueue `main`."""
    reservation, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-concurrent-{ns}"
    cluster.create(
        "resourceflavors", make_resource_flavor(reservation, {"instance-type": "reservation"})
    )
    cluster.create("resourceflavors", make_resource_flavor(spot, {"instance-type": "spot"}))
    names = {"reservation": reservation, "spot": spot, "cq": cq}
    try:
        cluster.create_active("clusterqueues", make_cluster_queue(
            cq,
            make_flavor_quotas(reservation, cpu="5", memory="1Gi"),
            make_flavor_quotas(spot, cpu="5", memory="1Gi"),
            concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}},
        ))  # fmt: skip
        cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
        yield names
    finally:
        cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.delete("localqueues", "main", ns)
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("resourceflavors", reservation)
        cluster.expect_deleted("resourceflavors", spot)


def _job(ns: str) -> dict:
    job = make_job("job", ns, queue="main", requests={"cpu": "200m", "memory": "20Mi"})
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    return job


def _variants(workloads: list[dict], parent: dict) -> list[dict]:
    """findVariantsForParent: the Workloads an owner reference ties to the parent."""
    return [
        wl for wl in workloads
        if wl["metadata"]["name"] != parent["metadata"]["name"]
        and any(o.get("uid") == parent["metadata"]["uid"]
                for o in wl["metadata"].get("ownerReferences") or ())
    ]  # fmt: skip


def _variant(workloads: list[dict], parent: str, flavor: str) -> dict | None:
    """getVariantByFlavor."""
    for wl in workloads:
        if wl["metadata"]["name"] == parent:
            continue
        owned = any(o.get("name") == parent for o in wl["metadata"].get("ownerReferences") or ())
        if owned and (wl["metadata"].get("annotations") or {}).get(ALLOWED_FLAVORS) == flavor:
            return wl
    return None


@kueue_case(
    GO,
    "ConcurrentAdmission Job is submitted to a ClusterQueue with ConcurrentAdmissionPolicy "
    "Should create one Parent Workload and one Variant per flavor",
)
def test_one_parent_and_a_variant_per_flavor(
    cluster: Cluster, ns: str, flavors: dict[str, str]
) -> None:
    created = cluster.batch.create_namespaced_job(ns, _job(ns))
    parent_name = cluster.workload_for_job(created, ns)

    def labelled() -> bool:
        parent = cluster.workload(parent_name, ns)
        assert parent is not None, "no parent workload"
        assert (parent["metadata"].get("labels") or {}).get(PARENT_LABEL) == "true"
        return True

    eventually(labelled, LONG_TIMEOUT, "the parent workload labelled")

    def one_per_flavor() -> bool:
        workloads = cluster.list("workloads", ns)
        assert len(workloads) == 3, [w["metadata"]["name"] for w in workloads]
        allowed = sorted(
            a
            for w in workloads
            if (a := (w["metadata"].get("annotations") or {}).get(ALLOWED_FLAVORS))
        )
        assert allowed == sorted([flavors["reservation"], flavors["spot"]]), allowed
        return True

    eventually(one_per_flavor, MEDIUM_TIMEOUT, "a variant per flavor")
    parent = cluster.workload(parent_name, ns)
    assert parent is not None
    eventually(lambda: len(_variants(cluster.list("workloads", ns), parent)) == 2, MEDIUM_TIMEOUT,
               "both variants owned by the parent")  # fmt: skip


def _flavor_of(cluster: Cluster, name: str, ns: str) -> str:
    wl = cluster.workload(name, ns)
    assert is_admitted(wl), (wl or {}).get("status")
    assignments = wl["status"]["admission"]["podSetAssignments"]
    assert assignments, "no podSetAssignments"
    return str(assignments[0]["flavors"]["cpu"])


def _reservation_quota(cluster: Cluster, cq: str, cpu: str, memory: str) -> None:
    def write() -> bool:
        body = cluster.get("clusterqueues", cq)
        resources = body["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        resources[0]["nominalQuota"], resources[1]["nominalQuota"] = cpu, memory
        cluster.custom.replace_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", cq, body)
        return True

    eventually(write, TIMEOUT, f"the reservation quota set to {cpu}")


@kueue_case(
    GO,
    "ConcurrentAdmission Job is submitted to a ClusterQueue with ConcurrentAdmissionPolicy "
    "Should migrate Job to more favorable flavor when its quota becomes available",
)
def test_migrates_to_the_preferred_flavor(
    cluster: Cluster, ns: str, flavors: dict[str, str]
) -> None:
    _reservation_quota(cluster, flavors["cq"], "0", "0")
    created = cluster.batch.create_namespaced_job(ns, _job(ns))
    parent = cluster.workload_for_job(created, ns)
    eventually(lambda: _flavor_of(cluster, parent, ns) == flavors["spot"], LONG_TIMEOUT,
               "the parent admitted on spot")  # fmt: skip

    def spot_admitted_reservation_pending() -> bool:
        workloads = cluster.list("workloads", ns)
        spot = _variant(workloads, parent, flavors["spot"])
        reservation = _variant(workloads, parent, flavors["reservation"])
        assert spot is not None, "spot variant not found"
        assert reservation is not None, "reservation variant not found"
        assert is_admitted(spot), "spot variant should be admitted"
        assert reservation["spec"].get("active", True), "reservation variant should be active"
        return True

    eventually(spot_admitted_reservation_pending, MEDIUM_TIMEOUT, "the variants")
    _reservation_quota(cluster, flavors["cq"], "5", "1Gi")
    eventually(lambda: _flavor_of(cluster, parent, ns) == flavors["reservation"], LONG_TIMEOUT,
               "the parent migrated to reservation")  # fmt: skip

    def spot_deactivated() -> bool:
        spot = _variant(cluster.list("workloads", ns), parent, flavors["spot"])
        assert spot is not None, "spot variant not found"
        assert spot["spec"].get("active", True) is False, "spot variant should be deactivated"
        return True

    eventually(spot_deactivated, MEDIUM_TIMEOUT, "the spot variant deactivated")

"""Kueue v0.19.2 test/e2e/singlecluster/baseline/tas_test.go, ported case by case.

Kueue's on-demand node is its kind cluster's `kind-worker`; here it is the real node, which
the package's fixture labels `instance-type: on-demand` (tests/e2e/kueue/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    SCHEDULING_GATE,
    TIMEOUT,
    Cluster,
    V,
    eventually,
    expect_workload_to_finish,
    make_cluster_queue,
    make_flavor_quotas,
    make_group,
    make_job,
    make_local_queue,
    make_pod,
    make_resource_flavor,
    pod_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/tas_test.go"
HOSTNAME = "kubernetes.io/hostname"
REQUIRED_TOPOLOGY = f"{KUEUE}/podset-required-topology"
TOPOLOGY_GATE = f"{KUEUE}/topology"


def assignment(node: str, count: int) -> dict:
    """tas.V1Beta2From(&tas.TopologyAssignment{Levels: [hostname], Domains: [{count, [node]}]})."""
    return {
        "levels": [HOSTNAME],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": node}],
                    "podCounts": {"universal": count}}],
    }  # fmt: skip


@pytest.fixture
def on_demand_node(cluster: Cluster) -> str:
    """kind-worker: the node labelled on-demand."""
    nodes = cluster.core.list_node(label_selector="instance-type=on-demand").items
    assert len(nodes) == 1, [n.metadata.name for n in nodes]
    return str(nodes[0].metadata.name)


@pytest.fixture
def tas_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    """The BeforeEach: a one-level (hostname) Topology, flavor on-demand with it, a ClusterQueue
    of 1 cpu and 1Gi, LocalQueue `main`. Yields the ClusterQueue."""
    topology, rf, cq = f"hostname-{ns}", f"on-demand-{ns}", f"cluster-queue-{ns}"
    cluster.create("topologies", {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology",
                                  "metadata": {"name": topology},
                                  "spec": {"levels": [{"nodeLabel": HOSTNAME}]}})  # fmt: skip
    flavor = make_resource_flavor(rf, {"instance-type": "on-demand"})
    flavor["spec"]["topologyName"] = topology
    cluster.create("resourceflavors", flavor)
    cluster.create_active("clusterqueues", make_cluster_queue(
        cq, make_flavor_quotas(rf, cpu="1", memory="1Gi")))  # fmt: skip
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield cq
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for pod in cluster.core.list_namespaced_pod(ns).items:
        try:
            cluster.core.patch_namespaced_pod(
                pod.metadata.name, ns, {"metadata": {"finalizers": None}}
            )
        except client.ApiException as err:
            if err.status != 404:
                raise
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "main", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)
    cluster.expect_deleted("topologies", topology)


def _admitted(cluster: Cluster, name: str, ns: str, timeout: float) -> dict:
    def admission() -> dict:
        wl = cluster.workload(name, ns)
        assert wl is not None, f"workload {name} not found"
        found = (wl.get("status") or {}).get("admission")
        assert found, "no admission yet"
        return dict(found)

    return dict(eventually(admission, timeout, f"workload {name} admitted"))


def _topology_assignment(admission: dict) -> dict:
    assignments = admission["podSetAssignments"]
    assert len(assignments) == 1, assignments
    return dict(assignments[0].get("topologyAssignment") or {})


@kueue_case(GO, "TopologyAwareScheduling Creating a Job requesting TAS should admit a Job via TAS")
def test_admits_a_job_via_tas(
    cluster: Cluster, ns: str, tas_queue: str, on_demand_node: str
) -> None:
    job = make_job("test-job", ns, queue="main", requests={"cpu": "700m", "memory": "20Mi"},
                   args=["entrypoint-tester"])  # fmt: skip
    job["spec"]["template"]["metadata"] = {"annotations": {REQUIRED_TOPOLOGY: HOSTNAME}}
    created = cluster.batch.create_namespaced_job(ns, job)
    wl_name = cluster.workload_for_job(created, ns)
    admission = _admitted(cluster, wl_name, ns, MEDIUM_TIMEOUT)
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    assert _topology_assignment(admission) == assignment(on_demand_node, 1)
    expect_workload_to_finish(cluster, wl_name, ns, LONG_TIMEOUT)


def _tas_pod(name: str, ns: str) -> dict:
    pod = make_pod(name, ns, queue="main", cpu="200m")
    for part in ("requests", "limits"):
        pod["spec"]["containers"][0]["resources"][part]["memory"] = "200Mi"
    pod["metadata"]["annotations"][REQUIRED_TOPOLOGY] = HOSTNAME
    return pod


def _gates(pod: client.V1Pod) -> set[str]:
    return {g.name for g in pod.spec.scheduling_gates or ()}


@kueue_case(
    GO, "TopologyAwareScheduling Creating a Pod requesting TAS should admit a single Pod via TAS"
)
def test_admits_a_single_pod_via_tas(
    cluster: Cluster, ns: str, tas_queue: str, on_demand_node: str
) -> None:
    created = cluster.core.create_namespaced_pod(ns, _tas_pod("test-pod", ns))
    assert {SCHEDULING_GATE, TOPOLOGY_GATE} <= _gates(created), _gates(created)

    def placed() -> bool:
        selector = cluster.core.read_namespaced_pod("test-pod", ns).spec.node_selector
        assert selector == {"instance-type": "on-demand", HOSTNAME: on_demand_node}, selector
        return True

    eventually(placed, MEDIUM_TIMEOUT, "the pod ungated onto the node")
    wl_name = pod_workload_name(created)
    admission = _admitted(cluster, wl_name, ns, MEDIUM_TIMEOUT)
    assert _topology_assignment(admission) == assignment(on_demand_node, 1)
    expect_workload_to_finish(cluster, wl_name, ns, LONG_TIMEOUT)


@kueue_case(
    GO, "TopologyAwareScheduling Creating a Pod requesting TAS should admit a Pod group via TAS"
)
def test_admits_a_pod_group_via_tas(
    cluster: Cluster, ns: str, tas_queue: str, on_demand_node: str
) -> None:
    group = make_group(_tas_pod("group", ns), 2)
    for pod in group:
        created = cluster.core.create_namespaced_pod(ns, pod)
        assert {SCHEDULING_GATE, TOPOLOGY_GATE} <= _gates(created), _gates(created)

    def placed() -> bool:
        for pod in group:
            live = cluster.core.read_namespaced_pod(pod["metadata"]["name"], ns)
            assert not _gates(live), _gates(live)
            assert live.spec.node_selector == {
                "instance-type": "on-demand",
                HOSTNAME: on_demand_node,
            }, live.spec.node_selector
        return True

    eventually(placed, MEDIUM_TIMEOUT, "the pods ungated onto the node")
    admission = _admitted(cluster, "group", ns, TIMEOUT)
    assert _topology_assignment(admission) == assignment(on_demand_node, 2)
    expect_workload_to_finish(cluster, "group", ns, LONG_TIMEOUT)

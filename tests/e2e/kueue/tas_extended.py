"""Kueue's TAS e2e kind cluster (test/e2e/tas/extended), for the port of that folder.

Kueue runs these cases on eight kind workers labelled by hack/testing/kind-cluster-tas.yaml:
two blocks of two racks of two hosts, all of node group `tas-group`, each given one
`example.com/gpu` by the suite's BeforeSuite. Here they are Nodes made by the test (no
kubelet: the stand-in kubelet runs their pods), under the same names, so a case's expected
host names read as Kueue's. The operators' CRDs are applied once; the operators themselves
are played by tas_operators.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.builders import ready_node
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.util import (
    KUEUE,
    MEDIUM_TIMEOUT,
    ROOT,
    Cluster,
    V,
    eventually,
    make_cluster_queue,
    make_local_queue,
    make_resource_flavor,
)

NODE_GROUP = "cloud.provider.com/node-group"  # helpers_test.go tasNodeGroupLabel
INSTANCE_TYPE = "tas-group"
GPU = "example.com/gpu"  # helpers_test.go extraResource
BLOCK = "cloud.provider.com/topology-block"  # utiltesting.DefaultBlockTopologyLevel
RACK = "cloud.provider.com/topology-rack"  # utiltesting.DefaultRackTopologyLevel
HOSTNAME = "kubernetes.io/hostname"
PREFERRED = f"{KUEUE}/podset-preferred-topology"
REQUIRED = f"{KUEUE}/podset-required-topology"
SLICE_REQUIRED = f"{KUEUE}/podset-slice-required-topology"
SLICE_SIZE = f"{KUEUE}/podset-slice-size"
GROUP_NAME = f"{KUEUE}/podset-group-name"
POD_INDEX_OFFSET = f"{KUEUE}/pod-index-offset"
PODSET_LABEL = f"{KUEUE}/podset"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# kind-worker .. kind-worker8, in the kind config's order.
KIND_WORKERS = {
    ("kind-worker" if i == 1 else f"kind-worker{i}"): (
        f"b{(i - 1) // 4 + 1}",
        f"r{(i - 1) // 2 % 2 + 1}",
    )
    for i in range(1, 9)
}

DATA = ROOT / "tests" / "data"
OPERATOR_CRDS = (
    DATA / "jobset" / "jobset.x-k8s.io_jobsets.yaml",
    DATA / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    DATA / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml",
    DATA / "kubeflow" / "kubeflow.org_pytorchjobs.yaml",
    DATA / "kuberay" / "ray.io_rayclusters.yaml",
    DATA / "kuberay" / "ray.io_rayjobs.yaml",
    DATA / "trainer" / "trainer.kubeflow.org_trainingruntimes.yaml",
    DATA / "trainer" / "trainer.kubeflow.org_trainjobs.yaml",
    DATA / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml",
)


@pytest.fixture(scope="session")
def operator_crds() -> None:
    """The operators' CRDs, established before Tower starts (session-scoped: before the
    package's `tower`), as Kueue's suite waits for each operator to be available."""
    for crd in OPERATOR_CRDS:
        # Server-side: the CRDs are larger than client-side apply's annotation allows.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


def kind_worker(name: str, block: str, rack: str) -> dict[str, Any]:
    labels = {NODE_GROUP: INSTANCE_TYPE, BLOCK: block, RACK: rack, HOSTNAME: name}
    return ready_node(name, labels, {"cpu": "8", "memory": "32Gi", "pods": "110", GPU: "1"})


@pytest.fixture(scope="module")
def kind_workers(api_client: client.ApiClient) -> Iterator[list[str]]:
    """The eight TAS workers, Ready and untainted; removed after the module."""
    core = client.CoreV1Api(api_client)
    for name, (block, rack) in KIND_WORKERS.items():
        body = kind_worker(name, block, rack)
        try:
            core.create_node(body)
        except client.ApiException as err:
            if err.status != 409:
                raise
            core.patch_node(name, {"metadata": {"labels": body["metadata"]["labels"]}})
        core.patch_node_status(name, {"status": body["status"]})
        kubectl("taint", "nodes", name, "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    yield list(KIND_WORKERS)
    kubectl("delete", "node", *KIND_WORKERS, "--ignore-not-found", "--wait=false", check=False)


def three_level_topology(name: str) -> dict[str, Any]:
    """utiltestingapi.MakeDefaultThreeLevelTopology: block, rack, hostname."""
    levels = [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": levels},
    }


LEFT_BEHIND = (
    ("clusterqueues", "cluster-queue"),
    ("resourceflavors", "tas-flavor"),
    ("topologies", "datacenter"),
)


@contextlib.contextmanager
def tas_queues(
    cluster: Cluster, namespace: str, local_queue: str, quotas: dict[str, str]
) -> Iterator[str]:
    """Each file's BeforeEach: Topology `datacenter`, ResourceFlavor `tas-flavor` of the
    node group, ClusterQueue `cluster-queue` with `quotas` of it, and the LocalQueue; the
    AfterEach removes them (Workloads first, their finalizers stripped). Yields the
    LocalQueue's name."""
    # What a run stopped midway left (the names are the suite's, one run at a time).
    for plural, name in LEFT_BEHIND:
        cluster.expect_deleted(plural, name)
    try:
        cluster.create("topologies", three_level_topology("datacenter"))
        flavor = make_resource_flavor("tas-flavor", {NODE_GROUP: INSTANCE_TYPE})
        flavor["spec"]["topologyName"] = "datacenter"
        cluster.create("resourceflavors", flavor)
        resources = [{"name": r, "nominalQuota": q} for r, q in quotas.items()]
        cq = make_cluster_queue("cluster-queue", {"name": "tas-flavor", "resources": resources})
        # MakeClusterQueue covers the resources in the order the flavor lists them.
        cq["spec"]["resourceGroups"][0]["coveredResources"] = list(quotas)
        cluster.create_active("clusterqueues", cq)
        cluster.create_active(
            "localqueues", make_local_queue(local_queue, namespace, "cluster-queue"), namespace
        )
        yield local_queue
    finally:
        for wl in cluster.list("workloads", namespace):
            cluster.delete("workloads", wl["metadata"]["name"], namespace, strip_finalizers=True)
        cluster.delete("localqueues", local_queue, namespace)
        for plural, name in LEFT_BEHIND:
            cluster.expect_deleted(plural, name)


def pods(cluster: Cluster, namespace: str, selector: str = "") -> list[client.V1Pod]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def expect_pods_created(cluster: Cluster, namespace: str, count: int) -> None:
    """ "ensure all pods are created"."""

    def created() -> bool:
        found = pods(cluster, namespace)
        assert len(found) == count, [p.metadata.name for p in found]
        return True

    eventually(created, MEDIUM_TIMEOUT, f"{count} pods created")


def expect_pods_scheduled(cluster: Cluster, namespace: str, count: int) -> list[client.V1Pod]:
    """ "ensure all pods are scheduled": `count` pods with a spec.nodeName."""

    def scheduled() -> list[client.V1Pod]:
        listed = cluster.core.list_namespaced_pod(namespace, field_selector="spec.nodeName!=").items
        assert len(listed) == count, sorted(
            (p.metadata.name, p.spec.node_name) for p in pods(cluster, namespace)
        )
        return list(listed)

    return list(eventually(scheduled, MEDIUM_TIMEOUT, f"{count} pods scheduled"))


def admitted_workload(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    def admission() -> dict[str, Any]:
        wl = cluster.workload(name, namespace)
        assert wl is not None, f"workload {name} not found"
        assert (wl.get("status") or {}).get("admission"), "no admission yet"
        return wl

    return dict(eventually(admission, MEDIUM_TIMEOUT, f"workload {name} admitted"))


def host_assignment(host: str, count: int) -> dict[str, Any]:
    """tas.V1Beta2From(TopologyAssignment{Levels: [hostname], Domains: [{count, [host]}]})."""
    return {
        "levels": [HOSTNAME],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": host}],
                    "podCounts": {"universal": count}}],
    }  # fmt: skip

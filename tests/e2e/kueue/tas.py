"""Kueue's TAS e2e kind cluster (hack/testing/kind-cluster-tas.yaml) as stand-in Nodes, and
the setup and reading its tas/ cases share.

Kueue's TAS suite runs on eight kind workers, two blocks of two racks of two hosts, each
labelled `cloud.provider.com/node-group: tas-group` and given one `example.com/gpu` by the
suite (tas/baseline/suite_test.go). Here they are Nodes made by the test under the same names
(`kind-worker` .. `kind-worker8`, the names Kueue's cases assert); the real scheduler binds the
pods Tower places there, and the stand-in kubelet (tests/e2e/kubelet.py) runs them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.builders import ready_node
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.util import (
    KUEUE,
    MEDIUM_TIMEOUT,
    Cluster,
    V,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

NODE_GROUP = "cloud.provider.com/node-group"
INSTANCE_TYPE = "tas-group"
EXTRA_RESOURCE = "example.com/gpu"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = f"{KUEUE}/podset-required-topology"
PREFERRED = f"{KUEUE}/podset-preferred-topology"
UNCONSTRAINED = f"{KUEUE}/podset-unconstrained-topology"
SLICE_REQUIRED = f"{KUEUE}/podset-slice-required-topology"
SLICE_SIZE = f"{KUEUE}/podset-slice-size"
WORKLOAD_ANNOTATION = f"{KUEUE}/workload"
TOPOLOGY_GATE = f"{KUEUE}/topology"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
POD_GROUP_INDEX = f"{KUEUE}/pod-group-pod-index"
STATEFULSET_INDEX = "apps.kubernetes.io/pod-index"

# kind-cluster-tas.yaml's workers in order: (name, block, rack).
KIND_WORKERS = [
    (f"kind-worker{i or ''}", block, rack)
    for i, (block, rack) in zip(
        (0, 2, 3, 4, 5, 6, 7, 8),
        [("b1", "r1")] * 2 + [("b1", "r2")] * 2 + [("b2", "r1")] * 2 + [("b2", "r2")] * 2,
        strict=True,
    )
]


def kind_worker(name: str, block: str, rack: str) -> dict[str, Any]:
    """A kind worker of the TAS cluster as a Ready Node with one example.com/gpu."""
    labels = {NODE_GROUP: INSTANCE_TYPE, BLOCK: block, RACK: rack, HOSTNAME: name}
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110", EXTRA_RESOURCE: "1"}
    return ready_node(name, labels, capacity)


def create_node(core: client.CoreV1Api, body: dict[str, Any]) -> None:
    """A Node made by hand: kube-apiserver taints it not-ready at create (no kubelet says it
    is ready; the node lifecycle controller is off here, so nothing lifts it)."""
    core.create_node(body)
    kubectl("taint", "nodes", body["metadata"]["name"],
            "node.kubernetes.io/not-ready:NoSchedule-", check=False)  # fmt: skip


def delete_node(core: client.CoreV1Api, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        core.delete_node(name, grace_period_seconds=0)

    def gone() -> bool:
        try:
            core.read_node(name)
        except client.ApiException as err:
            return err.status == 404
        return False

    eventually(gone, MEDIUM_TIMEOUT, f"node {name} deleted")


def restore_node(core: client.CoreV1Api, name: str) -> None:
    """The hotswap cases' AfterEach: the node deleted (if it is still there) and made again
    Ready, untainted."""
    (body,) = [kind_worker(n, b, r) for n, b, r in KIND_WORKERS if n == name]
    delete_node(core, name)
    create_node(core, body)


@pytest.fixture(scope="module")
def kind_workers(api_client: client.ApiClient, tower: Any) -> Iterator[list[str]]:
    """The eight TAS kind workers, for one test module; gone after it."""
    core = client.CoreV1Api(api_client)
    for name, _, _ in KIND_WORKERS:
        delete_node(core, name)
    for name, block, rack in KIND_WORKERS:
        create_node(core, kind_worker(name, block, rack))
    yield [name for name, _, _ in KIND_WORKERS]
    for name, _, _ in KIND_WORKERS:
        delete_node(core, name)


def _tolerates(toleration: client.V1Toleration, taint: client.V1Taint) -> bool:
    """v1 helper ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and (toleration.value or "") == (taint.value or "")


def _grace_under(pod: client.V1Pod, taints: list[client.V1Taint]) -> float | None:
    """How long the pod may stay under these NoExecute taints (None: for good), as the taint
    eviction controller reads its tolerations: at once if one is not tolerated, else the
    least tolerationSeconds among those that match."""
    used = []
    for taint in taints:
        matching = [t for t in pod.spec.tolerations or () if _tolerates(t, taint)]
        if not matching:
            return 0.0
        used += matching
    bounded = [t.toleration_seconds for t in used if t.toleration_seconds is not None]
    return float(max(0, min(bounded))) if bounded else None


@contextlib.contextmanager
def taint_eviction(cluster: Cluster, ns: str) -> Iterator[None]:
    """Plays kube-controller-manager's taint eviction controller for the namespace's pods: one
    bound to a Node with a NoExecute taint it does not tolerate (or tolerates only for
    tolerationSeconds, once they are over) is marked DisruptionTarget and deleted. This
    plane's controller cannot: it lists a node's pods by an index only the node lifecycle
    controller, which is off here, adds (kube-controller-manager logs "Index with name
    spec.nodeName does not exist")."""
    stop = threading.Event()
    seen: dict[tuple[str, str, str], float] = {}  # (node, taint key, value) -> first seen

    def sweep() -> None:
        now = time.monotonic()
        tainted: dict[str, list[client.V1Taint]] = {}
        for node in cluster.core.list_node().items:
            taints = [t for t in node.spec.taints or () if t.effect == "NoExecute"]
            for t in taints:
                seen.setdefault((node.metadata.name, t.key, t.value or ""), now)
            if taints:
                tainted[node.metadata.name] = taints
        for pod in cluster.core.list_namespaced_pod(ns).items:
            taints = tainted.get(pod.spec.node_name or "")
            if not taints or pod.metadata.deletion_timestamp is not None:
                continue
            grace = _grace_under(pod, taints)
            since = max(seen[(pod.spec.node_name, t.key, t.value or "")] for t in taints)
            if grace is None or now - since < grace:
                continue
            condition = {"type": "DisruptionTarget", "status": "True",
                         "reason": "DeletionByTaintManager",
                         "message": "Taint manager: deleting due to NoExecute taint"}  # fmt: skip
            with contextlib.suppress(client.ApiException):
                cluster.core.patch_namespaced_pod_status(
                    pod.metadata.name, ns, {"status": {"conditions": [condition]}}
                )
                cluster.core.delete_namespaced_pod(pod.metadata.name, ns)

    def run() -> None:
        while not stop.wait(0.2):
            with contextlib.suppress(client.ApiException):
                sweep()

    thread = threading.Thread(target=run, name="taint-eviction", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def three_level_topology(name: str) -> dict[str, Any]:
    """utiltestingapi.MakeDefaultThreeLevelTopology: block, rack, hostname."""
    levels = [{"nodeLabel": label} for label in (BLOCK, RACK, HOSTNAME)]
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": levels}}  # fmt: skip


@contextlib.contextmanager
def tas_queues(
    cluster: Cluster,
    ns: str,
    quotas: dict[str, str],
    local_queue: str = "main",
    *,
    topology: bool = True,
) -> Iterator[str]:
    """The cases' BeforeEach/AfterEach: Topology `datacenter` (three levels), flavor
    `tas-flavor` on the tas-group nodes with it (none with topology=False, as the pod group
    case without TAS), ClusterQueue with `quotas` of that flavor and the LocalQueue. Their
    names carry the namespace so a run left over cannot collide. Yields the ClusterQueue."""
    suffix = ns.rsplit("-", 1)[-1]
    topo, rf, cq = f"datacenter-{suffix}", f"tas-flavor-{suffix}", f"cluster-queue-{suffix}"
    flavor = make_resource_flavor(rf, {NODE_GROUP: INSTANCE_TYPE})
    if topology:
        cluster.create("topologies", three_level_topology(topo))
        flavor["spec"]["topologyName"] = topo
    cluster.create("resourceflavors", flavor)
    quota = make_flavor_quotas(rf, **dict(sorted(quotas.items())))  # coveredResources' order
    cluster.create_active("clusterqueues", make_cluster_queue(cq, quota))
    cluster.create_active("localqueues", make_local_queue(local_queue, ns, cq), ns)
    try:
        yield cq
    finally:
        cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        cluster.apps.delete_collection_namespaced_stateful_set(ns)
        cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for pod in cluster.core.list_namespaced_pod(ns).items:
            with contextlib.suppress(client.ApiException):
                cluster.core.patch_namespaced_pod(
                    pod.metadata.name, ns, {"metadata": {"finalizers": None}}
                )
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.delete("localqueues", local_queue, ns)
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("resourceflavors", rf)
        if topology:
            cluster.expect_deleted("topologies", topo)


def domains(topology_assignment: dict[str, Any]) -> list[tuple[list[str], int]]:
    """tas.InternalSeqFrom: each domain's values (one per level) and pod count, in order."""
    out: list[tuple[list[str], int]] = []
    levels = topology_assignment["levels"]
    for piece in topology_assignment.get("slices") or []:
        counts = piece["podCounts"]
        for i in range(piece["domainCount"]):
            values = []
            for level in piece["valuesPerLevel"][: len(levels)]:
                if "universal" in level:
                    values.append(level["universal"])
                else:
                    ind = level["individual"]
                    values.append(
                        f"{ind.get('prefix', '')}{ind['roots'][i]}{ind.get('suffix', '')}"
                    )
            count = counts["universal"] if "universal" in counts else counts["individual"][i]
            out.append((values, int(count)))
    return out


def hostname_assignment(*hosts: str) -> list[tuple[list[str], int]]:
    """tas.TopologyAssignment{Levels: [hostname], Domains: one pod on each host}, decoded."""
    return [([host], 1) for host in hosts]


def topology_assignment(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    """The admitted Workload's one podSet's topologyAssignment (an AssertionError until then)."""
    wl = cluster.workload(name, ns)
    assert wl is not None, f"workload {name} not found"
    admission = (wl.get("status") or {}).get("admission")
    assert admission, f"workload {name} has no admission"
    assignments = admission["podSetAssignments"]
    assert len(assignments) == 1, assignments
    found = assignments[0].get("topologyAssignment")
    assert found, f"workload {name}: no topologyAssignment in {assignments[0]}"
    return dict(found)


def expect_workload_topology_assignment(
    cluster: Cluster, name: str, ns: str, num_pods: int, nodes: list[str],
    timeout: float = MEDIUM_TIMEOUT,
) -> None:  # fmt: skip
    """hotswap_test.go expectWorkloadTopologyAssignment: hostname level only, one pod a
    domain, on exactly `nodes` in order."""

    def check() -> bool:
        found = topology_assignment(cluster, name, ns)
        assert found["levels"] == [HOSTNAME], found["levels"]
        got = domains(found)
        assert sum(count for _, count in got) == num_pods, got
        assert all(count == 1 for _, count in got), got
        assert [v for values, _ in got for v in values] == nodes, got
        return True

    eventually(check, timeout, f"workload {name} placed on {nodes}")


def running_pods(cluster: Cluster, ns: str, selector: str) -> list[client.V1Pod]:
    """Pods bound to a node and Running (the cases' field selectors), not being deleted."""
    pods = cluster.core.list_namespaced_pod(
        ns, label_selector=selector, field_selector="spec.nodeName!=,status.phase=Running"
    ).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def expect_pods_on_nodes(
    cluster: Cluster, ns: str, job_name: str, num_pods: int, nodes: list[str]
) -> None:
    """hotswap_test.go expectPodsOnNodes."""

    def check() -> bool:
        got = sorted(p.spec.node_name for p in running_pods(cluster, ns, f"job-name={job_name}"))
        assert got == sorted(nodes), got
        assert len(got) == num_pods
        return True

    eventually(check, MEDIUM_TIMEOUT, f"{job_name}'s pods running on {nodes}")


def pods_by_index(cluster: Cluster, ns: str, selector: str, index_label: str) -> dict[str, str]:
    """Each pod's index label -> its node (the ranks-ordering cases' gotAssignment)."""
    pods = cluster.core.list_namespaced_pod(ns, label_selector=selector).items
    return {p.metadata.labels.get(index_label, ""): p.spec.node_name for p in pods}


def expect_scheduled(cluster: Cluster, ns: str, count: int) -> list[client.V1Pod]:
    """`ensure all pods are scheduled`: `count` pods of the namespace bound to a node."""

    def bound() -> list[client.V1Pod]:
        pods = cluster.core.list_namespaced_pod(ns, field_selector="spec.nodeName!=").items
        assert len(pods) == count, [(p.metadata.name, p.spec.node_name) for p in pods]
        return list(pods)

    return list(eventually(bound, MEDIUM_TIMEOUT, f"{count} pods scheduled"))


def expect_job_unsuspended(
    cluster: Cluster, name: str, ns: str, timeout: float = MEDIUM_TIMEOUT
) -> None:
    def unsuspended() -> bool:
        job = cluster.batch.read_namespaced_job(name, ns)
        assert job.spec.suspend is False, "the job is still suspended"
        return True

    eventually(unsuspended, timeout, f"job {name} unsuspended")


def tas_job(
    name: str,
    ns: str,
    *,
    parallelism: int,
    completions: int,
    requests: dict[str, str],
    args: list[str],
    pod_annotations: dict[str, str] | None = None,
    queue: str = "main",
    indexed: bool = False,
) -> dict[str, Any]:
    """testingjob.MakeJob(...).Queue(q).Parallelism(p).Completions(c).RequestAndLimit(...)
    .PodAnnotation(...).Image(agnhost, args).TerminationGracePeriod(1)[.Indexed(true)]."""
    job = make_job(name, ns, queue=queue, args=args, requests=requests,
                   parallelism=parallelism, completions=completions)  # fmt: skip
    if pod_annotations:
        job["spec"]["template"]["metadata"] = {"annotations": dict(pod_annotations)}
    if indexed:
        job["spec"]["completionMode"] = "Indexed"
    return job

"""Kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner_test.go, its topology-aware
cases, ported case by case:

- TestAssignFlavors (L177): the leader-worker-set rows (pod set groups, podSetGroupName) and
  the row with two TAS flavors in one pod set;
- TestAssignFlavors_LeaderWorkerSetTASFlavor (L5801): every case;
- TestTasFlavorsOnly (L6108): see NOT_PORTED.

Kueue places pods on a topology inside its flavor assigner (WorkloadsTopologyRequests and
FindTopologyAssignmentsForWorkload, after the flavors are chosen); Tower places them once quota
fits, in the cycle's check (extender/core/tas/scheduling.py TopologyScheduling). So a row about flavor
matching calls Tower's flavor search, as test_flavorassigner.py does, and compares the
representative mode, each resource's flavor and mode, the usage and the NoFit reason; a row
whose expectation comes from Kueue's topology step runs one cycle with TopologyScheduling
attached and compares the pod sets' flavors (the admission's, or the search's for a workload
left pending) and the error that keeps the workload pending (Kueue's Assignment.Message(),
"failed to assign flavors to pod set <name>: <error>").
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.api.models import ClusterQueue, LocalQueue, PodSet, ResourceFlavor, Workload
from extender.core.api.quantity import to_amount
from extender.core.api.topology import HOSTNAME, REQUIRED, Topology, TopologyRequest
from extender.core.placement.model import Node
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.flavors import EXCEEDS_MAX_QUOTA, Assignment, search_flavors
from extender.core.scheduling.quota import QuotaTree
from extender.core.tas.scheduling import TopologyScheduling
from tests.builders import CQ
from tests.conformance.test_flavorassigner import flavors, rep_mode

FILE = "pkg/scheduler/flavorassigner/flavorassigner_test.go"
MI = 1024 * 1024
GPU, GPU_A, GPU_B = "example.com/gpu", "example.com/gpu-a", "example.com/gpu-b"
RESOURCES = {"gpu": GPU, "gpu_a": GPU_A, "gpu_b": GPU_B}

# TestAssignFlavors' flavors these rows use, and TestAssignFlavors_LeaderWorkerSetTASFlavor's.
FLAVORS = {
    f.name: f
    for f in (
        ResourceFlavor("one", {"type": "one"}),
        ResourceFlavor("two", {"type": "two"}),
        ResourceFlavor("tas-a", topology_name="tas-topo-a"),
        ResourceFlavor("tas-b", topology_name="tas-topo-b"),
        ResourceFlavor("non-tas"),
    )
}
TOPOLOGIES = (Topology("tas-topo-a", (HOSTNAME,)), Topology("tas-topo-b", (HOSTNAME,)))
# TestAssignFlavors_LeaderWorkerSetTASFlavor's nodes (TestAssignFlavors' TAS row has none).
LWS_NODES = tuple(
    Node(name, {HOSTNAME: name}, (), {"pods": 32, GPU_A: 4, GPU_B: 4})
    for name in ("tas-node-a", "tas-node-b")
)

# Kueue's errors (pkg/scheduler/flavorassigner/errors.go), as Assignment.Message() words them.
ERROR = "failed to assign flavors to pod set "
NO_TAS_FLAVOR = "no TAS flavor assigned"  # ErrNoTASFlavorAssigned
NO_TAS_CACHE = "workload requires Topology, but there is no TAS cache information"


def pod_set(
    name: str = "main",
    count: int = 1,
    *,
    group: str | None = None,
    required: str | None = None,
    **requests: str,
) -> PodSet:
    """A pod set as Kueue's MakePodSet builds one: requests per pod (cpu="1", gpu="1" for
    example.com/gpu, gpu_a and gpu_b for example.com/gpu-a and -b); `group` is
    PodSetGroup (topologyRequest.podSetGroupName), `required` RequiredTopologyRequest."""
    per_pod = {}
    for key, value in requests.items():
        resource = RESOURCES.get(key, key)
        per_pod[resource] = to_amount(resource, value)
    topology = None
    if required is not None:
        topology = TopologyRequest(REQUIRED, required, group=group)
    elif group is not None:
        topology = TopologyRequest(group=group)
    return PodSet(name, count, per_pod, topology=topology)


def search(cq: ClusterQueue, *pod_sets: PodSet) -> Assignment:
    """Tower's flavor search for the workload in the ClusterQueue, without usage (these rows
    have none, so Kueue's test oracle is never asked)."""
    tree = QuotaTree.build([cq], [])
    workload = Workload("default", "wl", "uid-wl", "lq", pod_sets)
    return search_flavors(workload, cq, FLAVORS, tree.cluster_queues[cq.name])


def one_cycle(
    cq: ClusterQueue, pod_sets: tuple[PodSet, ...], nodes: tuple[Node, ...] = ()
) -> tuple[ClusterState, Workload]:
    """One scheduling cycle with topology-aware scheduling attached (the flavors, the
    Topologies and the nodes of the Go test), for one workload in the ClusterQueue."""
    tas = TopologyScheduling()
    tas.set_topologies(TOPOLOGIES)
    tas.set_flavors(FLAVORS.values())
    for node in nodes:
        tas.set_node(node)
    state = ClusterState()
    state.configure(
        flavors=FLAVORS.values(),
        cluster_queues=[cq],
        local_queues=[LocalQueue("default", "lq", cq.name)],
        topologies=TOPOLOGIES,
    )
    state.add_admission_check(tas)
    state.on_release(tas.release)
    state.scheduler.topology = tas
    workload = Workload("default", "wl", "uid-wl", "lq", pod_sets)
    state.add_workload(workload)
    state.schedule(0.0)
    return state, workload


def lws_outcome(
    cq: ClusterQueue, *pod_sets: PodSet
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """What TestAssignFlavors_LeaderWorkerSetTASFlavor compares, after one cycle: the pod
    sets' errors (wantPodSetErrors: the error of a workload left pending, by pod set) and
    their flavors per resource (wantPodSetFlavors: the admission's, or the flavor search's
    when the workload is left pending)."""
    state, workload = one_cycle(cq, pod_sets, LWS_NODES)
    held = state.admitted_workload(workload.key)
    if held is not None:
        return {}, {psa.name: dict(psa.flavors) for psa in held.admission.pod_set_assignments}
    errors = {}
    message = state.pending_status(workload.key).message
    if message.startswith(ERROR):
        name, _, error = message[len(ERROR) :].partition(": ")
        errors[name] = error
    chosen = search(cq, *pod_sets).pod_set_flavors or tuple({} for _ in pod_sets)
    return errors, {ps.name: dict(f) for ps, f in zip(pod_sets, chosen, strict=True)}


def usage(a: Assignment) -> dict[tuple[str, str], int]:
    return dict(a.usage)


# ----- TestAssignFlavors (pod set groups, two TAS flavors in one pod set) ------------------


def test_multiple_flavors_leader_worker_set_leader_and_workers_request_the_same_resources_fits() -> (
    None
):
    """TestAssignFlavors L433: the group asks 9 cpu, more than flavor one's 4, so worker and
    leader both go to flavor two."""
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "9"})).obj()
    a = search(
        cq,
        pod_set("worker", 4, group="group1", cpu="2"),
        pod_set("leader", 1, group="group1", cpu="1"),
    )
    assert rep_mode(a) == "Fit"
    assert flavors(a, "worker", "leader") == {
        "worker": {"cpu": "two/Fit"},
        "leader": {"cpu": "two/Fit"},
    }
    assert usage(a) == {("two", "cpu"): 9_000}


def test_multiple_flavors_leader_worker_set_workers_request_gpu_leader_does_not_request_gpu_fits() -> (
    None
):
    """TestAssignFlavors L500: the second resource group (flavor two) covers cpu and memory
    as well as the GPU, and gives every resource of the group its flavor two."""
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "10", "memory": "10"}))
        .group(("two", {"cpu": "5", "memory": "5", GPU: "4"}))
        .obj()
    )
    a = search(
        cq,
        pod_set("worker", 4, group="group1", cpu="1", memory="1", gpu="1"),
        pod_set("leader", 1, group="group1", cpu="1", memory="1"),
    )
    assert rep_mode(a) == "Fit"
    assert flavors(a, "worker", "leader") == {
        "worker": {"cpu": "two/Fit", "memory": "two/Fit", GPU: "two/Fit"},
        "leader": {"cpu": "two/Fit", "memory": "two/Fit"},
    }
    assert usage(a) == {("two", "cpu"): 5_000, ("two", "memory"): 5, ("two", GPU): 4}


def test_multiple_flavors_leader_worker_set_workers_request_gpu_leader_does_not_request_gpu_does_not_fit_without_group_it_would_fit() -> (
    None
):
    """TestAssignFlavors L581: the group asks 5 cpu and 4 GPUs; flavor one has 4 cpu and
    flavor two no GPU, so nothing fits."""
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "4", GPU: "4"}), ("two", {"cpu": "5", GPU: "0"}))
        .obj()
    )
    a = search(
        cq,
        pod_set("worker", 4, group="group1", cpu="1", gpu="1"),
        pod_set("leader", 1, group="group1", cpu="1"),
    )
    assert rep_mode(a) == "NoFit"
    assert flavors(a) == {}
    assert usage(a) == {}
    assert a.reason == EXCEEDS_MAX_QUOTA  # UnadmittedWorkloadsObservability on


def test_multiple_tas_flavors_assigned_to_different_resources_in_the_same_podset_leads_to_nofit() -> (
    None
):
    """TestAssignFlavors L3442: cpu gets tas-a and memory tas-b, each Fit; a pod set on two
    TAS flavors cannot be placed, so the workload does not fit."""
    cq = (
        CQ("test-clusterqueue")
        .group(("tas-a", {"cpu": "10"}))
        .group(("tas-b", {"memory": "10Mi"}))
        .obj()
    )
    main = pod_set(required=HOSTNAME, cpu="1", memory="1Mi")
    a = search(cq, main)
    assert flavors(a, "main") == {"main": {"cpu": "tas-a/Fit", "memory": "tas-b/Fit"}}
    assert usage(a) == {("tas-a", "cpu"): 1_000, ("tas-b", "memory"): MI}
    state, workload = one_cycle(cq, (main,))
    assert not state.is_admitted(workload.key)
    assert state.queue_is_inadmissible(cq.name, workload.key)  # NoFit
    assert state.pending_status(workload.key).message == (
        f"{ERROR}main: more than one TAS flavor assigned: tas-a, tas-b"
    )


# ----- TestAssignFlavors_LeaderWorkerSetTASFlavor (L5801) ----------------------------------


def _two_tas_groups(second: Mapping[str, str]) -> ClusterQueue:
    return (
        CQ("test-clusterqueue").group(("tas-a", {GPU_A: "4"})).group(("tas-b", dict(second))).obj()
    )


def test_leader_without_a_managed_request_infers_the_groups_tas_flavor() -> None:
    """L5820: the leader requests nothing; it takes its group's TAS flavor, tas-a."""
    errors, chosen = lws_outcome(
        _two_tas_groups({"memory": "8Gi"}),
        pod_set("leader", required=HOSTNAME, group="group1"),
        pod_set("worker", required=HOSTNAME, group="group1", gpu_a="1"),
    )
    assert errors == {}
    assert chosen == {"leader": {GPU_A: "tas-a"}, "worker": {GPU_A: "tas-a"}}


def test_leader_without_a_group_is_rejected_cluster_queue_wide_fallback_is_not_supported() -> None:
    """L5849: a leader that requests nothing and has no group gets no TAS flavor, and the
    workload is refused with "no TAS flavor assigned"."""
    cq = CQ("test-clusterqueue").group(("tas-a", {GPU_A: "4"})).obj()
    errors, chosen = lws_outcome(
        cq,
        pod_set("leader", required=HOSTNAME),
        pod_set("worker", required=HOSTNAME, gpu_a="1"),
    )
    assert errors == {"leader": NO_TAS_FLAVOR}
    assert chosen == {"leader": {}, "worker": {GPU_A: "tas-a"}}


def test_peers_in_the_same_group_resolving_to_different_tas_flavors_are_rejected() -> None:
    """L5876: the group's GPUs resolve to tas-a and tas-b; the leader inherits both and the
    workload is refused."""
    errors, chosen = lws_outcome(
        _two_tas_groups({GPU_B: "4"}),
        pod_set("leader", required=HOSTNAME, group="group1"),
        pod_set("worker-a", required=HOSTNAME, group="group1", gpu_a="1"),
        pod_set("worker-b", required=HOSTNAME, group="group1", gpu_b="1"),
    )
    assert errors == {"leader": "more than one TAS flavor assigned: tas-a, tas-b"}
    assert chosen == {
        "leader": {GPU_A: "tas-a", GPU_B: "tas-b"},
        "worker-a": {GPU_A: "tas-a"},
        "worker-b": {GPU_B: "tas-b"},
    }


def test_multiple_groups_leaders_infer_flavors_from_their_own_groups() -> None:
    """L5913: each leader takes its own group's TAS flavor."""
    errors, chosen = lws_outcome(
        _two_tas_groups({GPU_B: "4"}),
        pod_set("leader1", required=HOSTNAME, group="group1"),
        pod_set("worker1", required=HOSTNAME, group="group1", gpu_a="1"),
        pod_set("leader2", required=HOSTNAME, group="group2"),
        pod_set("worker2", required=HOSTNAME, group="group2", gpu_b="1"),
    )
    assert errors == {}
    assert chosen == {
        "leader1": {GPU_A: "tas-a"},
        "worker1": {GPU_A: "tas-a"},
        "leader2": {GPU_B: "tas-b"},
        "worker2": {GPU_B: "tas-b"},
    }


def test_leader_in_group_where_peer_resolves_to_non_tas_flavor_is_rejected() -> None:
    """L5954: the worker (no topology request) gets the plain flavor non-tas; the leader asks
    for a topology in a ClusterQueue without TAS flavors and is refused."""
    cq = CQ("test-clusterqueue").group(("non-tas", {GPU_A: "4"})).obj()
    errors, chosen = lws_outcome(
        cq,
        pod_set("leader", required=HOSTNAME, group="group1"),
        pod_set("worker", group="group1", gpu_a="1"),
    )
    assert errors == {"leader": NO_TAS_CACHE}
    assert chosen == {"leader": {}, "worker": {GPU_A: "non-tas"}}


# Cases whose subject Tower's models cannot express, and why.
NOT_PORTED = {
    "TestTasFlavorsOnly": (
        "unit test of Kueue's internal helper tasFlavorsOnly (a ResourceAssignment filtered "
        "to TAS flavors); Tower has no such function: its filtering is inline in "
        "extender/core/tas/scheduling.py TopologyScheduling._placements, which the cases above exercise"
    ),
}

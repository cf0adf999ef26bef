"""Topology-aware admission in the cycle: a workload in a topology flavor is placed on its
domains, holds them, and waits with Kueue's message when no domain holds it."""

from __future__ import annotations

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    Preemption,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)
from extender.core.api.topology import (
    HOSTNAME,
    PREFERRED,
    REQUIRED,
    DomainAssignment,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.placement.model import Node
from extender.core.scheduling.cycle import ClusterState
from extender.core.tas.domains import TopologyDomains
from extender.core.tas.scheduling import TopologyScheduling

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
TOPOLOGY = Topology("default", (BLOCK, RACK, HOSTNAME))
FLAVOR = ResourceFlavor("tas-flavor", {"node-group": "tas"}, topology_name="default")


def node(name: str, block: str, rack: str, cpu: int = 4000) -> Node:
    labels = {"node-group": "tas", BLOCK: block, RACK: rack, HOSTNAME: name}
    return Node(name, labels, (), {"cpu": cpu, "memory": 16 << 30, "pods": 110})


NODES = [
    node("n1", "b1", "r1"),
    node("n2", "b1", "r1"),
    node("n3", "b1", "r2"),
    node("n4", "b2", "r1"),
]


def state(tas: TopologyScheduling) -> ClusterState:
    s = ClusterState()
    cq = ClusterQueue(
        "tas-cq",
        (ResourceGroup(("cpu",), (FlavorQuotas("tas-flavor", (ResourceQuota("cpu", 100_000),)),)),),
        namespace_selector=LabelSelector(),  # every namespace
    )
    s.configure(
        flavors=[FLAVOR],
        cluster_queues=[cq],
        local_queues=[LocalQueue("default", "lq", "tas-cq")],
        topologies=[TOPOLOGY],
    )
    s.add_admission_check(tas)
    s.on_release(tas.release)
    return s


def job(name: str, pods: int, request: TopologyRequest | None, t: float = 0.0) -> Workload:
    pod_set = PodSet("main", pods, {"cpu": 1000}, topology=request)
    return Workload("default", name, name, "lq", (pod_set,), creation_time=t)


def tas_with_nodes() -> TopologyScheduling:
    tas = TopologyScheduling()
    tas.set_topologies([TOPOLOGY])
    tas.set_flavors([FLAVOR])
    for n in NODES:
        tas.set_node(n)
    return tas


def test_a_rack_is_chosen_and_held_and_the_next_waits_with_kueues_message() -> None:
    tas = tas_with_nodes()
    s = state(tas)
    s.add_workload(job("a", 8, TopologyRequest(REQUIRED, RACK)))
    result = s.schedule(0.0)
    (admit,) = result.admitted
    assignment = admit.admission.pod_set_assignments[0].topology
    assert assignment == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("n1",), 4), DomainAssignment(("n2",), 4))
    )
    s.add_workload(job("b", 5, TopologyRequest(REQUIRED, RACK), 1.0))
    s.schedule(1.0)
    assert not s.is_admitted("default/b")
    assert s.pending_status("default/b").message == (
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 4 '
        'out of 5 pod(s). Total nodes: 4; excluded: resource "cpu": 2'
    )
    # Preferred: no rack, and no block, holds 5 more; at the top it spreads over blocks.
    s.add_workload(job("c", 5, TopologyRequest(PREFERRED, RACK), 2.0))
    (admit,) = s.schedule(2.0).admitted
    assert admit.admission.pod_set_assignments[0].topology == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("n3",), 4), DomainAssignment(("n4",), 1))
    )
    # The first finishes: its hosts are free again, and b fits in their rack.
    s.finish("default/a")
    assert tas.to_requeue() == {"tas-cq"}
    s.requeue_inadmissible({"tas-cq"})
    (admit,) = s.schedule(3.0).admitted
    assert admit.workload.name == "b"
    assert admit.admission.pod_set_assignments[0].topology == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("n1",), 4), DomainAssignment(("n2",), 1))
    )


def test_pods_outside_topology_scheduling_take_room() -> None:
    tas = tas_with_nodes()
    s = state(tas)
    tas.set_pod("other/p", "n1", {"cpu": 3500})
    s.add_workload(job("a", 8, TopologyRequest(REQUIRED, RACK)))
    s.schedule(0.0)
    assert "allows to fit only 4 out of 8 pod(s)" in s.pending_status("default/a").message


def test_a_flavor_without_its_topology_makes_the_queue_inactive() -> None:
    s = state(tas_with_nodes())
    s.delete_topology("default")
    assert s.cluster_queue_active("tas-cq")[1] == "TopologyNotFound"
    s.add_workload(job("a", 1, None))
    s.schedule(0.0)
    assert "TopologyNotFound" in s.pending_status("default/a").message


def test_a_failed_host_is_replaced_within_the_rack_or_the_workload_evicted() -> None:
    tas = tas_with_nodes()
    s = state(tas)
    s.add_workload(job("a", 6, TopologyRequest(REQUIRED, RACK)))
    (admit,) = s.schedule(0.0).admitted
    assert admit.admission.pod_set_assignments[0].topology == TopologyAssignment(
        (HOSTNAME,), (DomainAssignment(("n1",), 4), DomainAssignment(("n2",), 2))
    )
    # n2 goes NotReady: its 2 pods go elsewhere in rack b1/r1, to n1 only if it had room;
    # it has none, so nothing in the rack holds them: evicted with Kueue's message.
    tas.set_node(Node("n2", NODES[1].labels, (), NODES[1].allocatable, ready=False))
    assert tas.take_disturbed() == {"default/a"}
    holder = s.admitted_workload("default/a")
    assert holder is not None
    assert tas.replace(holder.workload, admit.admission) == (
        "Workload was evicted as there was no replacement for unhealthy node(s): n2"
    )


def test_a_failed_host_is_replaced_by_a_host_of_the_same_rack() -> None:
    tas = tas_with_nodes()
    tas.set_node(node("n5", "b1", "r1"))  # a third host in rack b1/r1
    s = state(tas)
    s.add_workload(job("a", 6, TopologyRequest(REQUIRED, RACK)))
    (admit,) = s.schedule(0.0).admitted
    first = admit.admission.pod_set_assignments[0].topology
    assert first is not None
    hosts = [d.values[0] for d in first.domains]
    failed = hosts[-1]
    failing = next(n for n in [*NODES, node("n5", "b1", "r1")] if n.name == failed)
    tas.delete_node(failing.name)
    assert tas.take_disturbed() == {"default/a"}
    holder = s.admitted_workload("default/a")
    assert holder is not None
    replaced = tas.replace(holder.workload, admit.admission)
    assert not isinstance(replaced, str)
    assert replaced is not None
    assignment = replaced.pod_set_assignments[0].topology
    assert assignment is not None
    assert assignment.total() == 6
    now = {d.values[0] for d in assignment.domains}
    assert failed not in now
    assert now <= {"n1", "n2", "n5"}  # still rack b1/r1
    # A second host failing evicts, naming both.
    tas.delete_node(sorted(now)[0])
    tas.delete_node(sorted(now)[-1])
    message = tas.replace(holder.workload, replaced)
    assert isinstance(message, str)
    assert message.startswith(
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
    )


def test_a_higher_priority_workload_preempts_to_get_a_rack() -> None:
    tas = tas_with_nodes()
    s = state(tas)
    s.scheduler.topology = tas
    cq = s.cluster_queue("tas-cq")
    assert cq is not None
    s.apply_cluster_queue(
        ClusterQueue(
            cq.name,
            cq.resource_groups,
            namespace_selector=LabelSelector(),
            preemption=Preemption(WithinClusterQueue.LOWER_PRIORITY),
        )
    )
    # Two small low-priority workloads, one in each rack of block b1 (n1+n2: r1, n3: r2).
    s.add_workload(job("low-1", 2, TopologyRequest(REQUIRED, HOSTNAME)))
    s.add_workload(job("low-2", 2, TopologyRequest(REQUIRED, HOSTNAME), 1.0))
    s.schedule(0.0)
    s.schedule(1.0)
    assert s.is_admitted("default/low-1")
    assert s.is_admitted("default/low-2")
    # 8 pods in one rack: quota holds them (100 cpu), r1 does only once low-* on it are gone.
    urgent = Workload(
        "default",
        "urgent",
        "urgent",
        "lq",
        (PodSet("main", 8, {"cpu": 1000}, topology=TopologyRequest(REQUIRED, RACK)),),
        priority=100,
        creation_time=2.0,
    )
    s.add_workload(urgent)
    result = s.schedule(2.0)
    evicted = sorted(e.workload.name for e in result.evicted)
    assert evicted  # preemption made room on a rack
    assert all(e.reason == "Preempted" for e in result.evicted)
    status = s.pending_status("default/urgent")
    assert status.message.startswith(
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only'
    )
    assert "waiting for preempted workloads to stop" in status.message
    for name in evicted:
        s.release(f"default/{name}")
    admitted = s.schedule(3.0).admitted
    assert [a.workload.name for a in admitted][:1] == ["urgent"]


def test_preemption_is_not_tried_when_even_empty_domains_cannot_hold_it() -> None:
    tas = tas_with_nodes()
    s = state(tas)
    s.scheduler.topology = tas
    s.add_workload(job("huge", 9, TopologyRequest(REQUIRED, RACK)))  # no rack has 9 cpu
    result = s.schedule(0.0)
    assert result.evicted == ()
    assert "allows to fit only 8 out of 9" in s.pending_status("default/huge").message


def test_pods_coming_and_going_change_a_built_snapshot_as_building_it_anew() -> None:
    tas = tas_with_nodes()
    request = TopologyRequest(REQUIRED, RACK)
    s = state(tas)
    s.add_workload(job("a", 2, request))
    s.schedule(0.0)  # the snapshot is built, with its counts for this request
    tas.set_pod("other/p1", "n3", {"cpu": 3500})  # r2's only host is nearly full now
    tas.set_pod("other/p2", "n1", {"cpu": 1000})
    tas.set_pod("other/p2", None, None)  # and that one is gone again
    fresh = tas_with_nodes()
    fresh.set_pod("other/p1", "n3", {"cpu": 3500})
    for holds in tas.held.values():
        fresh.hold("a", holds)
    probe = job("probe", 4, request)
    kept, anew = state(tas), state(fresh)
    for st in (kept, anew):
        st.add_workload(probe)
    got = kept.schedule(1.0).admitted
    want = anew.schedule(1.0).admitted
    assert [a.admission for a in got] == [a.admission for a in want]
    # 4 pods: rack b1/r1 has 6 cpu left, b1/r2 0.5 (the pod), b2/r1 4: the tightest, n4.
    (placed,) = got
    assignment = placed.admission.pod_set_assignments[0].topology
    assert assignment == TopologyAssignment((HOSTNAME,), (DomainAssignment(("n4",), 4),))


def test_a_mixed_queue_keeps_each_podset_to_its_kind_of_flavor() -> None:
    tas = tas_with_nodes()
    plain = ResourceFlavor("plain")
    s = ClusterState()
    quota = (ResourceQuota("cpu", 100_000),)
    cq = ClusterQueue(
        "mixed",
        (
            ResourceGroup(
                ("cpu",), (FlavorQuotas("tas-flavor", quota), FlavorQuotas("plain", quota))
            ),
        ),
        namespace_selector=LabelSelector(),
    )
    s.configure(
        flavors=[FLAVOR, plain],
        cluster_queues=[cq],
        local_queues=[LocalQueue("default", "lq", "mixed")],
        topologies=[TOPOLOGY],
    )
    s.add_admission_check(tas)
    s.add_workload(job("asks", 2, TopologyRequest(REQUIRED, RACK)))
    s.add_workload(job("does-not", 2, None, 1.0))
    admitted = {  # one head a cycle
        a.workload.name: a.admission.pod_set_assignments[0]
        for now in (0.0, 1.0)
        for a in s.schedule(now).admitted
    }
    assert admitted["asks"].flavors == {"cpu": "tas-flavor"}
    assert admitted["asks"].topology is not None
    assert admitted["does-not"].flavors == {"cpu": "plain"}  # off the topology flavor
    assert admitted["does-not"].topology is None


def cohort_state(
    tas: TopologyScheduling, *, fair_sharing: bool, nominal: tuple[int, int] = (8_000, 8_000)
) -> ClusterState:
    """Two ClusterQueues (8 cpu each unless `nominal` says) in one cohort over the four hosts,
    each reclaiming."""
    s = ClusterState(fair_sharing=fair_sharing)
    reclaim = Preemption(reclaim_within_cohort=ReclaimWithinCohort.ANY)
    s.configure(
        flavors=[FLAVOR],
        cluster_queues=[
            ClusterQueue(
                name,
                (
                    ResourceGroup(
                        ("cpu",), (FlavorQuotas("tas-flavor", (ResourceQuota("cpu", cpu),)),)
                    ),
                ),
                cohort="c",
                namespace_selector=LabelSelector(),
                preemption=reclaim,
            )
            for name, cpu in zip(("a", "b"), nominal, strict=True)
        ],
        local_queues=[LocalQueue("default", "lq-a", "a"), LocalQueue("default", "lq-b", "b")],
        topologies=[TOPOLOGY],
    )
    s.add_admission_check(tas)
    s.on_release(tas.release)
    s.scheduler.topology = tas
    return s


def test_fair_sharing_preempts_the_borrower_whose_hosts_make_a_rack() -> None:
    tas = tas_with_nodes()
    # a has no quota of its own, b all 16: a's workloads are all borrowed, so each may be
    # taken back (Kueue passes over a ClusterQueue once it no longer borrows).
    s = cohort_state(tas, fair_sharing=True, nominal=(0, 16_000))
    hosts_of: dict[str, tuple[str, ...]] = {}
    # a borrows: three workloads of one full host each, 12 of the cohort's 16 cpu.
    for i in range(3):
        pod_set = PodSet("main", 4, {"cpu": 1000}, topology=TopologyRequest(REQUIRED, HOSTNAME))
        s.add_workload(Workload("default", f"a-{i}", f"a-{i}", "lq-a", (pod_set,), creation_time=i))
        (admit,) = s.schedule(float(i)).admitted
        topology = admit.admission.pod_set_assignments[0].topology
        assert topology is not None
        hosts_of[admit.workload.name] = tuple(d.values[0] for d in topology.domains)
    # b asks for 8 cpu in one rack: only r1 of b1 (n1 and n2) is that big.
    wants = Workload(
        "default",
        "b-rack",
        "b-rack",
        "lq-b",
        (PodSet("main", 8, {"cpu": 1000}, topology=TopologyRequest(REQUIRED, RACK)),),
        creation_time=10.0,
    )
    s.add_workload(wants)
    result = s.schedule(10.0)
    on_rack = sorted(name for name, hosts in hosts_of.items() if set(hosts) & {"n1", "n2"})
    # Quota alone would take one workload (a-2, the latest); the rack needs exactly those on
    # n1 and n2, and only those. b stays within its nominal quota: FairSharingPreemptWithinNominal
    # reclaims whatever the shares.
    assert sorted(e.workload.name for e in result.evicted) == on_rack
    assert {e.preemption_reason for e in result.evicted} == {"InCohortReclamation"}
    for name in on_rack:  # the victims stop and are not queued again (deleted)
        s.finish(f"default/{name}")
    (admit,) = s.schedule(11.0).admitted
    assert admit.workload.name == "b-rack"
    topology = admit.admission.pod_set_assignments[0].topology
    assert topology is not None
    assert sorted(d.values[0] for d in topology.domains) == ["n1", "n2"]


def test_fair_sharing_does_not_preempt_when_its_strategy_refuses_the_rack() -> None:
    tas = tas_with_nodes()
    s = cohort_state(tas, fair_sharing=True)
    # a holds the 8-cpu rack within its own nominal quota: b reclaiming it would leave b
    # borrowing (a larger share than a's), which both of Kueue's strategies refuse.
    s.add_workload(job_in("a-rack", "lq-a", 8, TopologyRequest(REQUIRED, RACK)))
    assert [a.workload.name for a in s.schedule(0.0).admitted] == ["a-rack"]
    s.add_workload(job_in("b-small", "lq-b", 4, TopologyRequest(REQUIRED, HOSTNAME), 1.0))
    assert [a.workload.name for a in s.schedule(1.0).admitted] == ["b-small"]
    s.add_workload(job_in("b-rack", "lq-b", 8, TopologyRequest(REQUIRED, RACK), 2.0))
    result = s.schedule(2.0)
    assert result.evicted == ()
    assert not s.is_admitted("default/b-rack")


def job_in(name: str, lq: str, pods: int, request: TopologyRequest, t: float = 0.0) -> Workload:
    pod_set = PodSet("main", pods, {"cpu": 1000}, topology=request)
    return Workload("default", name, name, lq, (pod_set,), creation_time=t)


def test_a_queued_workload_is_counted_when_queued_and_placed_the_same(monkeypatch) -> None:
    """tas.prepare counts a queued workload's request shape (as it is and on empty domains)
    when it is queued; the cycle then counts no host afresh and decides as without it."""
    counted: list[str] = []
    real = TopologyDomains._count_leaf

    def counting(self, leaf, *args):  # type: ignore[no-untyped-def]
        counted.append(leaf.id)
        return real(self, leaf, *args)

    monkeypatch.setattr(TopologyDomains, "_count_leaf", counting)

    def run(prepare: bool) -> tuple[list[object], int, int]:
        tas = tas_with_nodes()
        if not prepare:
            monkeypatch.setattr(tas, "prepare", lambda workload, flavors: None)
        s = state(tas)
        s.scheduler.topology = tas
        counted.clear()
        s.add_workload(job("a", 8, TopologyRequest(REQUIRED, RACK)))
        s.add_workload(job("b", 3, TopologyRequest(PREFERRED, RACK), 1.0))
        when_queued = len(counted)
        counted.clear()
        admitted = [a.admission for a in s.schedule(0.0).admitted]
        admitted += [a.admission for a in s.schedule(1.0).admitted]
        return admitted, when_queued, len(counted)

    without, _, in_cycles_without = run(prepare=False)
    prepared, when_queued, in_cycles = run(prepare=True)
    assert prepared == without
    assert len(prepared) == 2
    # One request shape (both ask 1 cpu a pod; the level is not part of it), counted as it
    # is and on empty domains over the 4 hosts, when the first is queued.
    assert when_queued == 2 * len(NODES)
    # In the cycles only the hosts the first placement took are counted again.
    assert in_cycles < in_cycles_without
    assert in_cycles <= 2

"""Drives the admission core with the inputs of one of Kueue's test cases and reports what a
Kueue test checks: admissions with their flavors, preemptions, what is left in the queues."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from extender.core.api.models import (
    Admission,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    PodSetAssignment,
    ResourceFlavor,
    Workload,
)
from extender.core.api.quantity import to_amount
from extender.core.scheduling.cycle import ClusterState
from tests.builders import WL

# The namespaces Kueue's scheduler tests create, with the labels their selectors match.
KUEUE_NAMESPACES = (
    Namespace("default"),
    Namespace("eng-alpha", {"dep": "eng"}),
    Namespace("eng-beta", {"dep": "eng"}),
    Namespace("eng-gamma", {"dep": "eng"}),
    Namespace("sales", {"dep": "sales"}),
    Namespace("lend", {"dep": "lend"}),
)

Flavors = Mapping[str, Mapping[str, str]]
"""Per pod set, the flavor of each resource: {"main": {"cpu": "on-demand"}}."""

Assignments = dict[str, tuple[str, dict[str, dict[str, str]]]]
"""Per workload key, its ClusterQueue and flavors, as Kueue's wantAssignments says."""


def lq(namespace: str, name: str, cluster_queue: str) -> LocalQueue:
    return LocalQueue(namespace, name, cluster_queue)


@dataclass
class Outcome:
    """What one cycle left behind, in the terms Kueue's tables use."""

    assignments: Assignments
    preempted: dict[str, str]  # victim key -> Preempted condition reason
    left: dict[str, set[str]]  # ClusterQueue -> pending keys still active
    inadmissible: dict[str, set[str]]  # ClusterQueue -> pending keys set aside
    reasons: dict[str, str]  # pending key -> QuotaReserved=False reason
    messages: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # admitted pods per pod set


class Scenario:
    """A ClusterState holding one test case's configuration, admitted and pending workloads."""

    def __init__(
        self,
        *,
        flavors: Iterable[ResourceFlavor],
        cluster_queues: Iterable[ClusterQueue],
        local_queues: Iterable[LocalQueue] = (),
        cohorts: Iterable[Cohort] = (),
        namespaces: Iterable[Namespace] = KUEUE_NAMESPACES,
        fair_sharing: bool = False,
        partial_admission: bool = True,
    ) -> None:
        self.state = ClusterState(fair_sharing=fair_sharing)
        self.state.scheduler.partial_admission = partial_admission
        self.state.configure(
            flavors=flavors,
            cluster_queues=cluster_queues,
            cohorts=cohorts,
            local_queues=local_queues,
            namespaces=namespaces,
        )

    def admitted(
        self,
        wl: WL | Workload,
        cluster_queue: str,
        flavors: Flavors | None = None,
        at: float = 0.0,
        evicted: bool = False,
        held: Mapping[str, str] | None = None,
        **by_resource: str,
    ) -> Scenario:
        """A workload holding quota (Kueue's ReserveQuotaAt). Flavors per pod set, or for the
        single pod set as keyword arguments (cpu="on-demand"); `evicted` for one already
        being evicted; `held` where the admission holds other amounts than the requests."""
        workload = wl.obj() if isinstance(wl, WL) else wl
        if flavors is None:
            flavors = {
                workload.pod_sets[0].name: {r.replace("_", "/"): f for r, f in by_resource.items()}
            }
        assignments = []
        for pod_set in workload.pod_sets:
            chosen = dict(flavors.get(pod_set.name, {}))
            usage = {r: v for r, v in pod_set.totals.items() if r in chosen}
            if held is not None:
                usage = {r: to_amount(r, v) for r, v in held.items()}
            assignments.append(PodSetAssignment(pod_set.name, chosen, usage, pod_set.count))
        self.state.assume(workload, Admission(cluster_queue, tuple(assignments)), at)
        if evicted:
            self.state.mark_evicting(workload.key)
        return self

    def pending(self, *wls: WL | Workload) -> Scenario:
        for wl in wls:
            self.state.add_workload(wl.obj() if isinstance(wl, WL) else wl)
        return self

    def cycle(self, now: float = 0.0) -> Outcome:
        """One scheduling cycle, as Kueue's TestSchedule runs one."""
        result = self.state.schedule(now)
        outcome = self.outcome()
        outcome.preempted = {
            e.workload.key: e.preemption_reason or e.reason for e in result.evicted
        }
        return outcome

    def outcome(self) -> Outcome:
        state = self.state
        assignments: Assignments = {
            held.workload.key: (
                held.admission.cluster_queue,
                {psa.name: dict(psa.flavors) for psa in held.admission.pod_set_assignments},
            )
            for held in state.admitted_workloads()
        }
        left: dict[str, set[str]] = {}
        inadmissible: dict[str, set[str]] = {}
        reasons: dict[str, str] = {}
        messages: dict[str, str] = {}
        for name in state.cluster_queue_names():
            for workload in state.pending_workloads_in(name):
                where = inadmissible if state.queue_is_inadmissible(name, workload.key) else left
                where.setdefault(name, set()).add(workload.key)
        for workload, status in state.pending():
            reasons[workload.key] = status.reason
            messages[workload.key] = status.message
        counts = {
            held.workload.key: {psa.name: psa.count for psa in held.admission.pod_set_assignments}
            for held in state.admitted_workloads()
        }
        return Outcome(assignments, {}, left, inadmissible, reasons, messages, counts)

    def targets(
        self,
        incoming: WL | Workload,
        cluster_queue: str,
        preempt: Mapping[str, str] | Flavors,
        fit: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """TestPreemption's question: which admitted workloads would be preempted for this
        one, given the flavor each resource was assigned in Preempt mode (`preempt`: for
        every pod set, or per pod set) or in Fit mode (`fit`). Victim key -> reason."""
        workload = incoming.obj() if isinstance(incoming, WL) else incoming
        per_pod_set: dict[str, dict[str, str]] = {}
        need: set[tuple[str, str]] = set()
        for pod_set in workload.pod_sets:
            chosen = preempt.get(pod_set.name)
            preempting = dict(chosen) if isinstance(chosen, Mapping) else dict(preempt)  # type: ignore[arg-type]
            per_pod_set[pod_set.name] = {**(fit or {}), **preempting}
            need |= {(flavor, resource) for resource, flavor in preempting.items()}
        found = self.state.preemption_targets(workload, cluster_queue, per_pod_set, need)
        return {t.victim.workload.key: t.reason for t in found}


def assignment(
    cluster_queue: str, flavors: Flavors | None = None, **by_resource: str
) -> tuple[str, dict[str, dict[str, str]]]:
    """One entry of wantAssignments: assignment("sales", cpu="default") for pod set main."""
    if flavors is None:
        flavors = {"main": {r.replace("_", "/"): f for r, f in by_resource.items()}}
    return cluster_queue, {ps: dict(fs) for ps, fs in flavors.items()}
